"""Retirement: the owner proposes, an approver approves; the agent's tokens stop working, it
leaves the resync, its platform is asked to stop it, its history stays readable, and its
traffic is flagged as an unregistered agent's."""

import uuid
from datetime import UTC, datetime

import pytest

from audit.models import AuditEntry
from reconciliation.jobs import resync
from reconciliation.models import ReconcileRun
from registry import actions
from registry.models import Agent, DesiredStateVersion, Retirement
from runtime.models import BehaviourEvent, UnregisteredAgent
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import approved_agent, eventually, refund_manifest, token_client


def event() -> list[dict]:
    return [{"id": uuid.uuid4().hex, "agent": "refund-agent", "kind": "tool_call",
             "ts": datetime.now(UTC).isoformat(), "tool": "orders.lookup"}]


def snapshot() -> tuple:
    return (list(Agent.objects.values_list("name", "lifecycle")), Retirement.objects.count(),
            DesiredStateVersion.objects.count(), AuditEntry.objects.count())


def test_a_retired_agent_is_stopped_revoked_unreconciled_and_its_traffic_flagged(
        people, api_as, start_worker):
    agent = approved_agent(people, "refund-agent")
    sandbox_actions.ensure_sandbox(agent)
    own = token_client(people, agent)
    assert own.get("/api/v1/agents/refund-agent/desired-state").status_code == 200
    pending = actions.propose(agent, refund_manifest(model="gpt-5").spec,
                              agent.active_version.metadata, actor=people.alice, source="api")
    worker = start_worker("reconcile", "ingest", "default")
    eventually(lambda: ReconcileRun.objects.filter(agent=agent, result="converged").exists(),
               message=worker.output())

    alice, bob = api_as(people.alice), api_as(people.bob)
    proposed = alice.post("/api/v1/agents/refund-agent/retirement",
                          {"reason": "replaced by refunds-v2"}, format="json")
    assert proposed.status_code == 201, proposed.json()
    assert Agent.objects.get(pk=agent.pk).lifecycle == "active"  # nothing before approval
    approved = bob.post(f"/api/v1/retirements/{proposed.json()['id']}/approve",
                        {"comment": "v2 is live"}, format="json")
    assert approved.status_code == 200, approved.json()
    assert approved.json()["state"] == "approved"

    # Its tokens are revoked, its pending proposal withdrawn.
    assert own.get("/api/v1/agents/refund-agent/desired-state").status_code == 401
    assert DesiredStateVersion.objects.get(pk=pending.version.pk).state == "withdrawn"
    # Its platform is asked to stop it, through the connector, by a worker.
    eventually(lambda: SandboxAgent.objects.get(agent=agent).state.get("running") is False,
               timeout=60, message=worker.output())
    # The platform answers before the job records it (and a queued entry is placed by the
    # sequencer): the entry is waited for, never assumed written with the platform's state.
    stopped = eventually(lambda: AuditEntry.objects.filter(action="agent.stopped").first(),
                         timeout=60, message=worker.output)
    assert stopped.actor == "system:reconciler" and stopped.agent == "refund-agent"
    # The resync leaves it alone.
    runs = ReconcileRun.objects.filter(agent=agent).count()
    assert resync() == 0
    assert ReconcileRun.objects.filter(agent=agent).count() == runs
    # Its traffic, sent by its platform, is flagged as an unregistered agent's.
    sent = alice.post("/api/v1/events", event(), format="json")
    assert sent.status_code == 200 and sent.json()["accepted"] == 1
    assert UnregisteredAgent.objects.filter(name="refund-agent").exists()
    assert BehaviourEvent.objects.get(agent_name="refund-agent").agent_id is None
    # Its history stays readable, with who did what and why.
    detail = bob.get("/api/v1/agents/refund-agent")
    assert detail.status_code == 200 and detail.json()["lifecycle"] == "retired"
    ready = next(c for c in detail.json()["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Retired")  # never "Converged"
    retired = AuditEntry.objects.get(action="agent.retired")
    assert (retired.actor, retired.reason) == ("bob", "v2 is live")
    assert retired.after["proposals_withdrawn"] == [pending.version.pk]
    assert len(retired.after["tokens_revoked"]) == 1
    assert AuditEntry.objects.get(action="retirement.proposed").actor == "alice"


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["bob", "dana", "agent_token", "other_owner"])
def test_only_the_owner_proposes_a_retirement(people, api_as, who):
    from tests.conftest import make_person

    agent = approved_agent(people, "refund-agent")
    client = {"bob": lambda: api_as(people.bob), "dana": lambda: api_as(people.dana),
              "agent_token": lambda: token_client(people, agent),
              "other_owner": lambda: api_as(make_person("erin", "owner"))}[who]()
    before = snapshot()
    response = client.post("/api/v1/agents/refund-agent/retirement", {"reason": "x"},
                           format="json")
    assert response.status_code == 403
    assert snapshot() == before


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["alice", "dana"])
def test_the_owner_and_non_approvers_cannot_approve_a_retirement(people, api_as, who):
    actions.grant_role(people.alice, "approver", actor="system:test")  # alice is both
    approved_agent(people, "refund-agent")
    retirement = actions.propose_retirement("refund-agent", actor=people.alice, reason="old")
    client = api_as(getattr(people, who))
    before = snapshot()
    response = client.post(f"/api/v1/retirements/{retirement.pk}/approve", {}, format="json")
    assert response.status_code == 403
    assert snapshot() == before


@pytest.mark.django_db
def test_bad_and_repeated_retirements_change_nothing(people, api_as):
    approved_agent(people, "refund-agent")
    alice, bob = api_as(people.alice), api_as(people.bob)
    before = snapshot()
    for body in ({}, {"reason": ""}, {"reason": "x" * 2001}, ["reason"]):
        assert alice.post("/api/v1/agents/refund-agent/retirement", body,
                          format="json").status_code == 400
    assert alice.post("/api/v1/agents/nobody/retirement", {"reason": "x"},
                      format="json").status_code == 404
    assert bob.post("/api/v1/retirements/999999/approve", {}, format="json").status_code == 404
    assert snapshot() == before
    first = alice.post("/api/v1/agents/refund-agent/retirement", {"reason": "old"},
                       format="json").json()
    assert alice.post("/api/v1/agents/refund-agent/retirement", {"reason": "again"},
                      format="json").status_code == 409
    assert bob.post(f"/api/v1/retirements/{first['id']}/approve", {},
                    format="json").status_code == 200
    before = snapshot()
    assert bob.post(f"/api/v1/retirements/{first['id']}/approve", {},
                    format="json").status_code == 409
    assert alice.post("/api/v1/agents/refund-agent/retirement", {"reason": "again"},
                      format="json").status_code == 409
    assert snapshot() == before


@pytest.mark.django_db
def test_a_retired_agent_takes_no_new_version_rollback_or_token(people, api_as):
    agent = approved_agent(people, "refund-agent")
    retirement = actions.propose_retirement("refund-agent", actor=people.alice, reason="old")
    actions.approve_retirement(retirement.pk, actor=people.bob)
    alice = api_as(people.alice)
    before = snapshot()
    proposal = alice.post("/api/v1/agents/refund-agent/proposals",
                          {"spec": refund_manifest(model="gpt-5").spec}, format="json")
    assert proposal.status_code == 409 and proposal.json()["error"]["code"] == "retired"
    assert alice.post("/api/v1/agents/refund-agent/rollback", {"generation": 1},
                      format="json").status_code in (409, 422)
    from config.errors import Conflict

    with pytest.raises(Conflict):
        actions.issue_agent_token(agent, actor=people.alice)
    assert snapshot() == before
