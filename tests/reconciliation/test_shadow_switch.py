"""One agent's shadow mode is judged like a waiver on everything (issue 29 item 8).

The owner alone switched her agent to shadow mode, with no expiry: drift was no longer
corrected, while the same owner was refused a waiver on it. Now the owner only asks; a second
person (an approver or compliance, never the owner) approves; it lasts at most 30 days and
ends by itself (a pass scheduled at its end, and every pass after it), audited."""

from datetime import timedelta

import django_rq
import pytest
from django.utils import timezone

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.models import AgentStatus, Correction, ReconcileRun
from registry.choices import Role
from registry.models import Agent
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import BAD_DEPLOYMENT, approved_agent, eventually, make_person, token_client

ASK = {"enabled": True, "duration": "1h", "reason": "migration weekend"}


def status(agent: Agent) -> AgentStatus:
    return AgentStatus.objects.get_or_create(agent=agent)[0]


def tools(agent: Agent) -> list[str]:
    return SandboxAgent.objects.get(agent=agent).state["tools"]


@pytest.fixture
def agent(people):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    sandbox_actions.ensure_sandbox(agent)
    actions.reconcile_agent(agent.pk, trigger="approved")
    return agent


@pytest.mark.django_db
def test_the_owner_only_asks_and_her_drift_is_still_corrected(api_as, people, agent):
    alice = api_as(people.alice)
    asked = alice.post("/api/v1/agents/refund-agent/shadow", ASK, format="json")
    assert asked.status_code == 202, asked.json()
    assert asked.json() == {"shadow": False, "shadow_until": None, "pending": True,
                            "requested_by": "alice", "requested_duration": "1h"}
    assert AuditEntry.objects.filter(action="shadow.requested", actor="alice").exists()
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")
    assert "crm.search" not in tools(agent)  # corrected: the request changed nothing
    assert not Correction.objects.filter(agent=agent, result="shadow").exists()


@pytest.mark.django_db
def test_a_second_person_approves_and_it_has_an_end(api_as, people, agent):
    oscar = make_person("oscar", Role.OWNER)
    api_as(people.alice).post("/api/v1/agents/refund-agent/shadow", ASK, format="json")
    path = "/api/v1/agents/refund-agent/shadow/approve"
    assert api_as(people.alice).post(path, format="json").status_code == 403
    assert api_as(oscar).post(path, format="json").status_code == 403
    assert token_client(people, agent).post(path, format="json").status_code == 403
    assert status(agent).shadow is False
    approved = api_as(people.bob).post(path, format="json")
    assert approved.status_code == 200, approved.json()
    current = status(agent)
    assert current.shadow is True
    assert timedelta(minutes=59) < current.shadow_until - timezone.now() <= timedelta(hours=1)
    entry = AuditEntry.objects.filter(action="shadow.changed").latest("pk")
    assert (entry.actor, entry.after["approved_by"], entry.after["requested_by"]) == (
        "bob", "bob", "alice")
    assert api_as(people.carol).post(path, format="json").status_code == 409  # nothing waits


@pytest.mark.django_db
def test_an_owner_who_is_also_an_approver_still_needs_someone_else(api_as, people, agent):
    from registry import actions as registry_actions

    registry_actions.grant_role(people.alice, Role.APPROVER, actor="system:test")
    alice = api_as(people.alice)
    assert alice.post("/api/v1/agents/refund-agent/shadow", ASK, format="json").status_code == 202
    refused = alice.post("/api/v1/agents/refund-agent/shadow/approve", format="json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "four_eyes"
    assert status(agent).shadow is False


@pytest.mark.django_db
@pytest.mark.parametrize("body, pointer", [
    ({"enabled": True, "reason": "x"}, "/duration"),
    ({"enabled": True, "duration": "31d", "reason": "x"}, "/duration"),
    ({"enabled": True, "duration": "forever", "reason": "x"}, "/duration"),
    ({"enabled": True, "duration": "0s", "reason": "x"}, "/duration"),
    ({"enabled": True, "duration": "1h"}, "/reason"),
    ({"enabled": True, "duration": "1h", "reason": "   "}, "/reason"),
    ({"enabled": "perhaps", "duration": "1h", "reason": "x"}, "enabled"),
    ({"duration": "1h", "reason": "x"}, "enabled"),
])
@pytest.mark.parametrize("who", ["alice", "dana"])
def test_a_shadow_without_an_end_or_a_reason_is_refused(api_as, people, agent, body, pointer,
                                                        who):
    before = AuditEntry.objects.count()
    answer = api_as(getattr(people, who)).post("/api/v1/agents/refund-agent/shadow", body,
                                               format="json")
    assert answer.status_code == 400, answer.json()
    assert pointer in str(answer.json()["error"]["details"])
    assert status(agent).shadow is False and not status(agent).shadow_request
    assert AuditEntry.objects.count() - before <= 1  # at most the token issued for the client


@pytest.mark.django_db
def test_compliance_switches_it_on_for_a_time_and_the_owner_off_at_once(api_as, people,
                                                                       agent):
    on = api_as(people.dana).post("/api/v1/agents/refund-agent/shadow",
                                  {**ASK, "duration": "8h"}, format="json")
    assert on.status_code == 200 and on.json()["shadow"] is True
    assert on.json()["shadow_until"] is not None
    off = api_as(people.alice).post("/api/v1/agents/refund-agent/shadow", {"enabled": False},
                                    format="json")
    assert off.status_code == 200 and off.json()["shadow"] is False
    assert status(agent).shadow_until is None


@pytest.mark.django_db
def test_a_pass_after_its_end_enforces_again_and_says_so(people, agent):
    actions.set_shadow(actor=people.dana, agent=agent, enabled=True, duration="1h",
                       reason="migration")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")
    assert "crm.search" in tools(agent)  # shadow: recorded, not applied
    AgentStatus.objects.filter(agent=agent).update(
        shadow_until=timezone.now() - timedelta(seconds=1))
    actions.reconcile_agent(agent.pk, trigger="resync")  # any pass after the end
    assert "crm.search" not in tools(agent)
    assert status(agent).shadow is False
    entry = AuditEntry.objects.get(action="shadow.expired")
    assert entry.actor == "system:reconciler" and entry.before["shadow"] is True


def test_the_shadow_ends_by_itself_on_real_workers(people, api_as, start_worker):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    sandbox_actions.ensure_sandbox(agent)
    worker = start_worker("reconcile", "ingest", "default",
                          RECONCILE_VERIFY_DELAY_SECONDS="1")
    eventually(lambda: ReconcileRun.objects.filter(agent=agent, result="converged").exists(),
               timeout=90, message=worker.output())
    api_as(people.alice).post("/api/v1/agents/refund-agent/shadow",
                              {**ASK, "duration": "30s"}, format="json")
    approved = api_as(people.bob).post("/api/v1/agents/refund-agent/shadow/approve",
                                       format="json")
    assert approved.status_code == 200, approved.json()
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="bad")
    eventually(lambda: ReconcileRun.objects.filter(agent=agent, shadow=True,
                                                   result="drifted").exists(),
               timeout=90, message=worker.output())
    # nobody switches it off: its own scheduled pass ends it and corrects the drift
    run = eventually(lambda: ReconcileRun.objects.filter(
        agent=agent, trigger="shadow_expired").first(), timeout=150, message=worker.output())
    eventually(lambda: "crm.search" not in tools(agent), timeout=90, message=worker.output())
    assert status(agent).shadow is False
    assert AuditEntry.objects.get(action="shadow.expired").actor == "system:reconciler"
    ends = approved.json()["shadow_until"].replace("Z", "+00:00")
    assert run.started_at >= timezone.datetime.fromisoformat(ends)


def drain(queue) -> list[tuple]:
    """Run what waits in `queue`, and what that queues, here: (job, args, result) each."""
    ran = []
    while jobs := queue.get_jobs():
        for job in jobs:
            queue.remove(job)
            ran.append((job.func_name, job.args, job.perform()))
    return ran


def test_switching_a_shadow_off_corrects_what_it_recorded_at_once(
        transactional_db, people, agent, redis_client):
    """Not at the next periodic resync: the switch asks for a pass, which corrects."""
    queue = django_rq.get_queue("reconcile")
    actions.set_shadow(actor=people.dana, agent=agent, enabled=True, duration="1h",
                       reason="migration")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="bad")
    drain(queue)
    assert "crm.search" in tools(agent)  # recorded, not applied
    actions.set_shadow(actor=people.alice, agent=agent, enabled=False, reason="done")
    assert drain(queue) == [("reconciliation.jobs.reconcile_agent", (agent.pk, "manual"),
                             "corrected")]
    assert "crm.search" not in tools(agent)
    actions.set_shadow(actor=people.alice, agent=agent, enabled=False)  # already off
    assert drain(queue) == []


def test_switching_the_clusters_shadow_off_runs_the_resync_at_once(
        transactional_db, people, agent, redis_client):
    queue = django_rq.get_queue("reconcile")
    actions.set_shadow(actor=people.dana, enabled=True)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="bad")
    drain(queue)
    actions.reconcile_agent(agent.pk, trigger="observation")
    assert "crm.search" in tools(agent)
    actions.set_shadow(actor=people.dana, enabled=False)
    ran = drain(queue)
    assert ran[0][0] == "reconciliation.jobs.resync"
    assert ("reconciliation.jobs.reconcile_agent", (agent.pk, "resync"), "corrected") in ran
    assert "crm.search" not in tools(agent)
