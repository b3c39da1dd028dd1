"""The poller: a pushed commit becomes a proposal (never applied without approval), its
status goes back to the commit, and each agent says how it stands against the branch."""

import re

import pytest
from django.test import Client

from audit.models import AuditEntry
from gitsource import actions as git_actions
from gitsource.jobs import poll_source
from gitsource.models import GitChange, ManagedAgent
from reconciliation.actions import reconcile_agent
from registry import actions
from registry.models import Agent, DesiredStateVersion
from tests.gitsource.repos import manifest

pytestmark = pytest.mark.django_db

MODEL_5 = ("model: gpt-4.1", "model: gpt-5")


def visible(html: str) -> str:
    """The page's text as read: tags dropped, white space folded."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def source_for(people, url: str, **extra):
    return git_actions.create_source(actor=people.alice, name="payments", url=url,
                                     branch="main", folder="agents", team="payments", **extra)


def test_a_pushed_commit_becomes_a_proposal_approved_by_someone_else(people, repo):
    sha = repo.commit({"agents/refund.yaml": manifest(), "README.md": "not a manifest"},
                      "Add the refund agent")
    repo.push()
    source = source_for(people, f"file://{repo.bare}",
                        commit_url="https://git.example/payments/commit/{sha}")

    assert poll_source(source.pk)["head"] == sha
    proposal = DesiredStateVersion.objects.get()
    agent = Agent.objects.get(name="refund-agent")
    assert (proposal.state, proposal.source, agent.generation) == ("pending", "git", 0)
    assert proposal.proposed_by == people.alice
    assert proposal.comment == (
        f"Git commit {sha[:12]} by Alice Owner <alice@example.com>: Add the refund agent "
        f"(https://git.example/payments/commit/{sha})")
    assert ManagedAgent.objects.get(agent=agent).sync == "ahead"

    poll_source(source.pk)  # the same head again proposes nothing new
    assert DesiredStateVersion.objects.count() == 1

    actions.approve_proposal(proposal.pk, actor=people.bob)
    poll_source(source.pk)
    managed = ManagedAgent.objects.get(agent=agent)
    assert (managed.sync, managed.message) == (
        "in_sync", f"in sync with commit {sha[:12]}, approved as generation 1")
    page = Client()
    page.force_login(people.carol)
    text = page.get("/agents/refund-agent/").content.decode()
    assert f"in sync with commit {sha[:12]}, approved as generation 1" in text


def test_each_commit_gets_its_verdict_back_over_smart_http(people, repo, git_host):
    sha = repo.commit({"agents/refund.yaml": manifest()}, "Add the refund agent")
    repo.push()
    source = source_for(people, f"{git_host.url}/agents.git",
                        status_url=f"{git_host.url}/status/agents.git")
    poll_source(source.pk)
    proposal = DesiredStateVersion.objects.get()
    assert [s["state"] for s in repo.statuses(sha)] == ["pending"]
    assert repo.statuses(sha)[0]["context"] == "agent-governance/refund-agent"
    assert repo.statuses(sha)[0]["target_url"].endswith(f"/proposals/{proposal.pk}/")

    actions.approve_proposal(proposal.pk, actor=people.bob)
    poll_source(source.pk)
    assert [s["state"] for s in repo.statuses(sha)] == ["pending", "success"]
    assert repo.statuses(sha)[1]["description"] == (
        f"approved and applied as generation 1 (proposal {proposal.pk})")
    reconcile_agent(Agent.objects.get().pk, trigger="approved")  # the sandbox converges
    poll_source(source.pk)
    assert repo.statuses(sha)[-1]["description"] == (
        f"approved and applied as generation 1 and verified (proposal {proposal.pk})")

    second = repo.commit({"agents/refund.yaml": manifest(MODEL_5)}, "Move to gpt-5")
    repo.push()
    poll_source(source.pk)
    rejected = DesiredStateVersion.objects.get(state="pending")
    actions.reject_proposal(rejected.pk, actor=people.carol, comment="not yet")
    poll_source(source.pk)
    assert [s["state"] for s in repo.statuses(second)] == ["pending", "failure"]
    assert len(repo.statuses(sha)) == 3  # nothing new to say about the first commit
    assert ManagedAgent.objects.get().sync == "refused"
    assert Agent.objects.get().active_version.spec["model"] == "gpt-4.1"


def test_a_force_push_that_drops_an_approved_change_is_diverged_not_rolled_back(
        people, repo):
    first = repo.commit({"agents/refund.yaml": manifest()}, "Add the refund agent")
    repo.push()
    source = source_for(people, str(repo.bare))
    poll_source(source.pk)
    actions.approve_proposal(DesiredStateVersion.objects.get().pk, actor=people.bob)
    second = repo.commit({"agents/refund.yaml": manifest(MODEL_5)}, "Move to gpt-5")
    repo.push()
    poll_source(source.pk)
    actions.approve_proposal(DesiredStateVersion.objects.get(state="pending").pk,
                             actor=people.bob)

    repo.reset_hard(first)
    repo.push(force=True)
    poll_source(source.pk)

    agent = Agent.objects.get()
    assert (agent.generation, agent.active_version.spec["model"]) == (2, "gpt-5")
    assert not DesiredStateVersion.objects.filter(state="pending").exists()
    managed = ManagedAgent.objects.get()
    assert managed.sync == "diverged"
    page = Client()
    page.force_login(people.carol)
    listed = page.get("/agents/").content.decode()
    assert 'class="git-sync git-diverged"' in listed and "Git: Diverged" in listed
    assert managed.message.startswith(f"approved commit {second[:12]} (generation 2) is no "
                                      "longer in branch main")
    assert AuditEntry.objects.filter(action="git_agent.diverged", agent="refund-agent").count() == 1
    fleet = Client()
    fleet.force_login(people.dana)
    summary = visible(fleet.get("/fleet/").content.decode())
    assert ("0 of 1 agent managed from Git is in sync with its branch; 0 ahead (a commit waits "
            "for approval), 1 diverged") in summary
    assert re.search(rf"refund-agent ?: diverged approved commit {second[:12]}", summary)

    # a new commit on the rewritten branch is proposed, and still says diverged until approved
    repo.commit({"agents/refund.yaml": manifest(("version: \"2.3.0\"", "version: \"2.4.0\""))},
                "New version")
    repo.push()
    poll_source(source.pk)
    pending = DesiredStateVersion.objects.get(state="pending")
    assert ManagedAgent.objects.get().sync == "diverged"
    actions.approve_proposal(pending.pk, actor=people.bob)
    poll_source(source.pk)
    assert ManagedAgent.objects.get().sync == "in_sync"
    assert "1 of 1 agent managed from Git is in sync" in visible(
        fleet.get("/fleet/").content.decode())


def test_a_fetch_that_fails_keeps_the_approved_state_and_says_so(people, repo, git_host,
                                                                api_as):
    repo.commit({"agents/refund.yaml": manifest()}, "Add the refund agent")
    repo.push()
    source = source_for(people, f"{git_host.url}/agents.git")
    poll_source(source.pk)
    actions.approve_proposal(DesiredStateVersion.objects.get().pk, actor=people.bob)
    poll_source(source.pk)
    git_host.stop()

    assert poll_source(source.pk)["polled"] is False
    assert poll_source(source.pk)["polled"] is False
    source.refresh_from_db()
    assert source.fetch_error.startswith("git fetch failed:")
    status = api_as(people.carol).get("/api/v1/agents/refund-agent/git").json()
    assert status["fetch_error"].startswith(f"fetching {source.url} has failed since ")
    assert status["fetch_error"].endswith("generation 1 stays enforced")
    agent = Agent.objects.get()
    assert agent.generation == 1 and ManagedAgent.objects.get().sync == "in_sync"
    failed = AuditEntry.objects.filter(action="git_source.fetch_failed")
    assert [e.reason for e in failed] == ["the last approved desired state stays enforced"]


def test_a_manifest_a_guardrail_denies_is_refused_and_recorded(people, repo):
    actions.create_guardrail(actor=people.dana, name="no-gpt-5", effect="deny",
                             expression='spec.model != "gpt-5"', message="not approved")
    sha = repo.commit({"agents/refund.yaml": manifest(MODEL_5),
                       "agents/broken.yaml": "kind: Agent\nmetadata: {name: x}\n"},
                      "Two manifests")
    repo.push()
    source = source_for(people, str(repo.bare))
    poll_source(source.pk)
    assert not DesiredStateVersion.objects.exists() and not Agent.objects.exists()
    refused = {c.path: c.refused for c in GitChange.objects.filter(commit=sha)}
    assert refused["agents/refund.yaml"].startswith("refund-agent: refused by guardrail no-gpt-5")
    assert refused["agents/broken.yaml"].startswith("agents/broken.yaml: ")
    assert AuditEntry.objects.filter(action="git_commit.refused").count() == 2


def test_an_agent_managed_from_git_refuses_edits_from_elsewhere(people, repo, api_as):
    repo.commit({"agents/refund.yaml": manifest()}, "Add the refund agent")
    repo.push()
    poll_source(source_for(people, str(repo.bare)).pk)
    actions.approve_proposal(DesiredStateVersion.objects.get().pk, actor=people.bob)

    from tests.conftest import refund_manifest

    answer = api_as(people.alice).post("/api/v1/agents/refund-agent/proposals",
                                       {"spec": refund_manifest(model="gpt-5").spec},
                                       format="json")
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "managed_by_git"
    assert "managed from Git (source payments" in answer.json()["error"]["message"]
    rollback = api_as(people.alice).post("/api/v1/agents/refund-agent/recertify", {},
                                         format="json")
    assert rollback.status_code == 201  # what the branch holds may be recertified
    assert DesiredStateVersion.objects.filter(spec__model="gpt-5").count() == 0


def test_a_manifest_removed_from_the_branch_leaves_the_agent_diverged_not_retired(people, repo):
    repo.commit({"agents/refund.yaml": manifest()}, "Add the refund agent")
    repo.push()
    source = source_for(people, str(repo.bare))
    poll_source(source.pk)
    actions.approve_proposal(DesiredStateVersion.objects.get().pk, actor=people.bob)
    repo.commit({"agents/refund.yaml": None, "agents/other.txt": "x"}, "Remove it")
    repo.push()
    poll_source(source.pk)
    managed = ManagedAgent.objects.get()
    assert managed.sync == "diverged" and "no longer in branch main" in managed.message
    agent = Agent.objects.get()
    assert (agent.lifecycle, agent.generation) == ("active", 1)


def test_a_source_naming_someone_elses_agent_neither_proposes_nor_locks_it(people, repo,
                                                                           api_as):
    from registry.choices import Role
    from tests.conftest import approved_agent, make_person, refund_manifest

    approved_agent(people, "refund-agent")  # alice's, approved by bob
    oscar = make_person("oscar", Role.OWNER)
    repo.commit({"agents/refund.yaml": manifest(MODEL_5)}, "Take over refund-agent")
    repo.push()
    source = git_actions.create_source(actor=oscar, name="oscars", url=str(repo.bare),
                                       folder="agents")
    poll_source(source.pk)
    assert not DesiredStateVersion.objects.filter(state="pending").exists()
    assert GitChange.objects.get().refused.startswith("refund-agent is owned by alice")
    assert not ManagedAgent.objects.exists()
    answer = api_as(people.alice).post("/api/v1/agents/refund-agent/proposals",
                                       {"spec": refund_manifest(version="2.4.0").spec},
                                       format="json")
    assert answer.status_code == 201
