"""Policy as code: compliance's rules in a source's policy folder. A commit becomes a policy
proposal that a compliance person other than its committer approves; only then is it applied
(through each rule's own action, audited). A commit whose test cases fail is refused with the
failing cases named, on the record and in the commit status."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from audit.models import AuditEntry
from config.errors import NotAllowed
from gitsource import actions as git_actions
from gitsource.jobs import poll_source
from gitsource.models import PolicyChange
from registry import actions
from registry.choices import Role, VersionSource
from registry.models import DesiredStateVersion, Guardrail, ReviewInterval, ToxicCombination
from runtime.models import GroupRule
from tests.conftest import eventually, make_person, refund_manifest
from tests.gitsource.repos import manifest, signing_key
from tests.gitsource.test_policy_tests import GUARDRAIL, TESTS

pytestmark = pytest.mark.django_db

GROUP_RULE = """\
apiVersion: governance/v1
kind: GroupRule
metadata: {name: refunds-per-day}
spec: {measure: amount, limit: 10000, per: 1d, match: {action: payments.refund},
       selector: {team: payments}}
"""
TOXIC = """\
apiVersion: governance/v1
kind: ToxicCombination
metadata: {name: customers-to-email}
spec: {left: "data:customers_db:read", right: "tool:email.send_external"}
"""
INTERVAL = """\
apiVersion: governance/v1
kind: ReviewInterval
metadata: {name: high}
spec: {interval: 60d}
"""


def policy_files(expect_for_gpt5: str = "denied", **extra: str | None) -> dict[str, str | None]:
    return {"policies/no-gpt-5.yaml": GUARDRAIL,
            "policies/no-gpt-5_test.yaml": TESTS % expect_for_gpt5,
            "policies/examples/gpt-4.1.yaml": manifest(),
            "policies/examples/gpt-5.yaml": manifest(("model: gpt-4.1", "model: gpt-5")),
            **{f"policies/{name}": text for name, text in extra.items()}}


@pytest.fixture
def erin(people):
    return make_person("erin", Role.COMPLIANCE)


@pytest.fixture
def signed_by(people, repo, tmp_path):
    """Commits signed with the registered key of the person named."""

    def sign(person) -> None:
        key, public = signing_key(tmp_path, person.username)
        git_actions.register_signing_key(actor=person, public_key=public)
        repo.author(person.username.title(), f"{person.username}@example.com", key=key)

    return sign


def policy_source(people, url: str, **extra):
    return git_actions.create_source(actor=people.alice, name="payments", url=url,
                                     folder="agents", policy_folder="policies",
                                     require_signed=True, **extra)


def worker_for(start_worker, repo, git_settings):
    """A real worker that sends commit statuses queued at decision time."""
    return start_worker("default", GIT_SOURCE_LOCAL_ROOTS=str(repo.root),
                 GIT_CACHE_DIR=git_settings.GIT_CACHE_DIR,
                 GIT_SOURCE_ALLOWED_HOSTS="127.0.0.1:*")


def test_a_policy_commit_is_applied_only_after_another_compliance_person_approves(
        people, repo, git_host, erin, signed_by, api_as, start_worker, git_settings):
    worker = worker_for(start_worker, repo, git_settings)
    signed_by(people.dana)
    sha = repo.commit(policy_files(**{"refunds.yaml": GROUP_RULE, "toxic.yaml": TOXIC,
                                      "review.yaml": INTERVAL}), "Payments policies")
    repo.push()
    source = policy_source(people, f"{git_host.url}/agents.git",
                           status_url=f"{git_host.url}/status/agents.git")
    poll_source(source.pk)

    change = PolicyChange.objects.get()
    assert (change.state, change.proposed_by, change.signer) == ("pending", people.dana, "dana")
    assert [(s["op"], s["kind"], s["name"]) for s in change.plan] == [
        ("create", "guardrail", "no-gpt-5"), ("create", "group_rule", "refunds-per-day"),
        ("create", "toxic_combination", "customers-to-email"),
        ("update", "review_interval", "high")]
    assert [c["ok"] for c in change.tests] == [True, True]
    # the example manifests beside the policies are not agents
    assert not DesiredStateVersion.objects.exists()
    assert not Guardrail.objects.exists() and not GroupRule.objects.exists()
    assert not ToxicCombination.objects.exists() and not ReviewInterval.objects.exists()
    assert [s["state"] for s in repo.statuses(sha)] == ["pending"]
    assert repo.statuses(sha)[0]["context"] == "agent-governance/policies"

    for who in (people.dana, people.bob):  # the committer; not compliance
        with pytest.raises(NotAllowed):
            git_actions.approve_policy_change(change.pk, actor=who)
    refused = api_as(people.dana).post(f"/api/v1/git/policy-changes/{change.pk}/approve", {},
                                       format="json")
    assert refused.status_code == 403
    assert not Guardrail.objects.exists()

    answer = api_as(erin).post(f"/api/v1/git/policy-changes/{change.pk}/approve",
                               {"comment": "reviewed"}, format="json")
    assert answer.status_code == 200 and answer.json()["state"] == "applied"
    guardrail = Guardrail.objects.get(name="no-gpt-5")
    assert (guardrail.expression, guardrail.effect, guardrail.selector) == (
        'spec.model != "gpt-5"', "deny", {"team": "payments"})
    rule = GroupRule.objects.get(name="refunds-per-day")
    assert (rule.measure, rule.limit, rule.per) == ("amount", 10000, "1d")
    assert ToxicCombination.objects.get().right == "tool:email.send_external"
    assert ReviewInterval.objects.get(level="high").seconds == 60 * 86400
    trail = AuditEntry.objects.filter(actor="erin").values_list("action", flat=True)
    assert {"guardrail.created", "group_rule.created", "toxic_rule.created",
            "review_interval.changed", "git_policy.applied"} <= set(trail)

    # the status went back at approval (a worker sent it), without a poll
    eventually(lambda: len(repo.statuses(sha)) == 2, timeout=120,
               message=lambda: f"statuses: {repo.statuses(sha)}\nworker: {worker.output()}")
    assert [s["state"] for s in repo.statuses(sha)] == ["pending", "success"]
    assert repo.statuses(sha)[-1]["description"] == (
        "approved by erin, applied (4 change(s)); verified: the rules in force are this "
        "commit's")

    # a guardrail applied from Git now judges proposals as any other does
    with pytest.raises(Exception, match="refused by guardrail no-gpt-5"):
        actions.apply_manifests([refund_manifest(model="gpt-5")], actor=people.alice,
                                source=VersionSource.YAML)

    # a rule the folder no longer states is deleted, again only after approval
    repo.commit({"policies/refunds.yaml": None}, "Drop the refund limit")
    repo.push()
    poll_source(source.pk)
    dropped = PolicyChange.objects.get(state="pending")
    assert [(s["op"], s["name"]) for s in dropped.plan] == [("delete", "refunds-per-day")]
    assert GroupRule.objects.exists()
    git_actions.approve_policy_change(dropped.pk, actor=erin)
    assert not GroupRule.objects.exists()
    assert Guardrail.objects.filter(name="no-gpt-5").exists()


def test_an_agent_commit_hears_each_approval_at_once(people, repo, git_host, start_worker,
                                                    git_settings):
    worker = worker_for(start_worker, repo, git_settings)
    told = lambda: f"statuses: {repo.statuses(sha)}\nworker: {worker.output()}"  # noqa: E731
    actions.create_guardrail(actor=people.dana, name="two-for-refunds", message="two people",
                             expression='!("payments.refund" in spec.tools)',
                             effect="require_approvals", required_approvals=2)
    sha = repo.commit({"agents/refund.yaml": manifest()}, "Add the refund agent")
    repo.push()
    git_actions.create_source(actor=people.alice, name="payments",
                              url=f"{git_host.url}/agents.git", folder="agents",
                              status_url=f"{git_host.url}/status/agents.git")
    eventually(lambda: len(repo.statuses(sha)) == 1, timeout=120, message=told)
    proposal = DesiredStateVersion.objects.get()
    assert repo.statuses(sha)[0]["description"] == (
        f"proposal {proposal.pk} waiting for approval: 0 of 2")

    actions.approve_proposal(proposal.pk, actor=people.bob)  # no poll from here on
    eventually(lambda: len(repo.statuses(sha)) == 2, timeout=120, message=told)
    assert repo.statuses(sha)[1] == {**repo.statuses(sha)[0], "description": (
        f"proposal {proposal.pk} waiting for approval: 1 of 2")}
    actions.approve_proposal(proposal.pk, actor=people.carol)
    eventually(lambda: len(repo.statuses(sha)) == 3, timeout=120, message=told)
    assert (repo.statuses(sha)[2]["state"], repo.statuses(sha)[2]["description"]) == (
        "success", f"approved and applied as generation 1 (proposal {proposal.pk})")


def test_gitlab_hears_its_own_state_names(people, repo, git_host, erin, signed_by):
    signed_by(people.dana)
    sha = repo.commit(policy_files(expect_for_gpt5="warned"), "Warn on gpt-5")
    repo.push()
    source = policy_source(people, f"{git_host.url}/agents.git",
                           status_url=f"{git_host.url}/api/v4/projects/agents.git")
    poll_source(source.pk)
    (status,) = repo.statuses(sha)
    assert (status["state"], status["name"]) == ("failed", "agent-governance/policies")
    assert "context" not in status
    assert status["target_url"].endswith(
        f"/git/policy-changes/{PolicyChange.objects.get().pk}/")


def test_a_policy_commit_whose_cases_fail_is_refused_with_the_cases_named(
        people, repo, git_host, erin, signed_by):
    signed_by(people.dana)
    sha = repo.commit(policy_files(expect_for_gpt5="warned"), "Warn on gpt-5")
    repo.push()
    source = policy_source(people, f"{git_host.url}/agents.git",
                           status_url=f"{git_host.url}/status/agents.git")
    poll_source(source.pk)

    change = PolicyChange.objects.get()
    assert change.state == "refused"
    assert change.refused == ("1 of 2 policy test case(s) failed: no-gpt-5-cases: gpt-5 is "
                              "denied (expected warned, got denied)")
    assert [c["case"] for c in change.failing_cases] == ["gpt-5 is denied"]
    (status,) = repo.statuses(sha)
    assert status["state"] == "failure"
    assert "no-gpt-5-cases: gpt-5 is denied (expected warned, got denied)" in (
        status["description"])
    assert AuditEntry.objects.get(action="git_policy.refused").reason == change.refused
    assert not Guardrail.objects.exists()
    with pytest.raises(Exception, match="not pending"):
        git_actions.approve_policy_change(change.pk, actor=erin)
    assert not Guardrail.objects.exists()


def test_policies_are_compliances_and_unreadable_ones_are_refused(people, repo, signed_by):
    signed_by(people.alice)  # an owner, not compliance staff
    repo.commit(policy_files(), "Alice writes policy")
    repo.push()
    source = policy_source(people, f"file://{repo.bare}")
    poll_source(source.pk)
    assert PolicyChange.objects.get().refused.startswith(
        "policies are compliance's: alice, who proposes commit")

    signed_by(people.dana)
    repo.commit({"policies/no-gpt-5.yaml": GUARDRAIL.replace("effect: deny", "effect: maybe")},
                "A typo")
    repo.push()
    poll_source(source.pk)
    typo = PolicyChange.objects.order_by("-pk").first()
    assert typo.state == "refused"
    assert "guardrail no-gpt-5: /spec/effect: " in typo.refused
    repo.commit({"policies/no-gpt-5.yaml": GUARDRAIL.replace(
        "expression: 'spec.model != \"gpt-5\"'", "expression: 'spec.model !='")}, "Bad CEL")
    repo.push()
    poll_source(source.pk)
    assert PolicyChange.objects.order_by("-pk").first().refused.startswith(
        "The expression is not valid CEL")
    assert not Guardrail.objects.exists()
    assert AuditEntry.objects.filter(action="git_policy.refused").count() == 3


def test_a_policy_proposal_shows_what_it_would_have_flagged_last_week(people, repo, erin,
                                                                      signed_by, api_as):
    (outcome,) = actions.apply_manifests([refund_manifest(model="gpt-5")],
                                         actor=people.alice, source=VersionSource.YAML)
    DesiredStateVersion.objects.filter(pk=outcome.version.pk).update(
        created_at=timezone.now() - timedelta(days=2))
    signed_by(people.dana)
    repo.commit(policy_files(), "No gpt-5 for payments")
    repo.push()
    poll_source(policy_source(people, f"file://{repo.bare}").pk)
    change = PolicyChange.objects.get()

    # judging the commit tried its plan and rolled it back: nothing of it stayed
    assert DesiredStateVersion.objects.get().state == "pending"
    assert not AuditEntry.objects.filter(action="guardrail.created").exists()

    body = api_as(erin).get(f"/api/v1/git/policy-changes/{change.pk}").json()
    (step,) = body["what_if"]["steps"]
    assert step["step"] == "create guardrail no-gpt-5"
    assert step["summary"].startswith("would have flagged: 1 of 1 proposals flagged (1 denied)")
    assert step["result"]["proposals"]["agents"] == [{"agent": "refund-agent", "denied": 1}]

    page = Client()
    page.force_login(erin)
    text = page.get(f"/git/policy-changes/{change.pk}/").content.decode()
    assert "create guardrail no-gpt-5: would have flagged: 1 of 1 proposals flagged" in text
    assert "Approve and apply" in text
    answer = page.post(f"/git/policy-changes/{change.pk}/approve", {"comment": "ok"})
    assert answer.status_code == 302
    assert Guardrail.objects.filter(name="no-gpt-5").exists()
    assert DesiredStateVersion.objects.get().state == "rejected"  # judged by it now
    assert api_as(erin).get(f"/api/v1/git/policy-changes/{change.pk}").json()[
        "what_if"] is None  # decided: nothing left to weigh


def test_policy_tests_over_the_api_judge_and_change_nothing(people, api_as):
    files = {k.removeprefix("policies/"): v for k, v in policy_files().items()}
    answer = api_as(people.alice).post("/api/v1/policy-tests", {"files": files}, format="json")
    assert answer.status_code == 200
    assert (answer.json()["passed"], answer.json()["failed"]) == (2, 0)
    failing = api_as(people.alice).post("/api/v1/policy-tests", {"files": {
        **files, "no-gpt-5_test.yaml": TESTS % "warned"}}, format="json").json()
    assert failing["failed"] == 1
    assert failing["results"][1]["line"] == (
        "FAIL no-gpt-5-cases: gpt-5 is denied: expected warned, got denied (gpt-5 is not "
        "approved for payments)")
    bad = api_as(people.alice).post("/api/v1/policy-tests", {"files": {
        **files, "no-gpt-5.yaml": GUARDRAIL.replace("effect: deny", "effect: maybe")}},
        format="json")
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "invalid_policy")
    assert "/spec/effect" in bad.json()["error"]["message"]
    assert not Guardrail.objects.exists() and not PolicyChange.objects.exists()


def test_a_group_rule_from_git_is_replayed_over_last_weeks_events(people, repo, erin,
                                                                   signed_by, api_as):
    import uuid
    from datetime import UTC, datetime

    from runtime import actions as runtime_actions
    from tests.conftest import approved_agent

    approved_agent(people, "refund-agent")
    now = datetime.now(UTC)
    refunds = [{"id": uuid.uuid4().hex, "agent": "refund-agent", "kind": "action",
                "action": "payments.refund", "amount": 4000,
                "ts": (now - timedelta(days=2, minutes=index)).isoformat()}
               for index in range(3)]  # 12,000 within a day: over the 10,000 limit
    assert runtime_actions.ingest_events(refunds, actor=people.admin, now=now).to_dict()[
        "accepted"] == 3
    signed_by(people.dana)
    repo.commit(policy_files(**{"refunds.yaml": GROUP_RULE}), "Refunds per day")
    repo.push()
    poll_source(policy_source(people, f"file://{repo.bare}").pk)
    change = PolicyChange.objects.get()

    steps = api_as(erin).get(f"/api/v1/git/policy-changes/{change.pk}").json()[
        "what_if"]["steps"]
    rule = next(s for s in steps if s["kind"] == "group_rule")
    assert rule["summary"] == ("would have flagged: breaches 1, findings 1 (events replayed "
                               "3, agents covered 1)")
    assert rule["result"]["agents"] == [{"agent": "refund-agent", "findings": 1}]
    owner_view = api_as(people.alice).get(f"/api/v1/git/policy-changes/{change.pk}").json()
    assert owner_view["what_if"] is None  # it names agents across owners


def test_a_policy_with_text_no_database_holds_is_refused_saying_why(people, repo, signed_by):
    """YAML's "\\0" escape is valid YAML and a NUL no PostgreSQL text holds: the commit is
    refused with where, like any unreadable policy, instead of failing the source's poll
    (a NUL in a guardrail's name went into the refusal's own text)."""
    signed_by(people.dana)
    repo.commit({**policy_files(), "policies/no-gpt-5.yaml": GUARDRAIL.replace(
        "{name: no-gpt-5}", '{name: "no-gpt-5\\0"}')}, "A NUL in a name")
    repo.push()
    source = policy_source(people, f"file://{repo.bare}")
    poll_source(source.pk)
    change = PolicyChange.objects.get()
    assert change.state == "refused"
    assert change.refused.startswith("no-gpt-5.yaml: document 1: every string must be text")
    assert "no NUL character" in change.refused
    assert not Guardrail.objects.exists()
