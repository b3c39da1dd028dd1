"""Waivers that expire: an approver time-boxes an exception with a reason and a ticket; the
live pass, live ingest, the periodic resync and the backtest all allow exactly what it covers,
and when it ends the agent is enforced again by itself and the audit says the waiver lapsed."""

import uuid
from datetime import UTC, datetime

import pytest

from audit.models import AuditEntry
from reconciliation.jobs import resync
from reconciliation.models import Escalation, Finding, ReconcileRun
from registry import actions
from registry.models import Agent, Waiver
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import BAD_DEPLOYMENT, approved_agent, eventually, refund_manifest, token_client

WAIVER = {"pointer": "/tools/crm.search", "reason": "CRM lookups during the migration",
          "ticket": "CHG-1234", "duration": "1h"}


def snapshot() -> tuple:
    return Waiver.objects.count(), AuditEntry.objects.count()


def tools(agent: Agent) -> list[str]:
    return SandboxAgent.objects.get(agent=agent).state["tools"]


def crm_search_event() -> list[dict]:
    return [{"id": uuid.uuid4().hex, "agent": "refund-agent", "kind": "tool_call",
             "ts": datetime.now(UTC).isoformat(), "tool": "crm.search"}]


def backtest_flags(client, agent: Agent, people) -> int:
    """How many past calls of crm.search the current spec flags, by a pending proposal's
    backtest (the proposal only changes the model)."""
    outcome = actions.propose(agent, refund_manifest(
        model="gpt-5", enforcement={"default": "correct", "behaviour": "escalate"}).spec,
        agent.active_version.metadata, actor=people.alice, source="api")
    body = client.get(f"/api/v1/proposals/{outcome.version.pk}/backtest").json()
    return sum(r["current"] for r in body["rules"] if r["pointer"] == "/tools/crm.search")


def test_live_pass_ingest_resync_and_backtest_agree_on_a_waiver_until_it_lapses(
        people, api_as, start_worker):
    agent = approved_agent(people, "refund-agent",
                           enforcement={"default": "correct", "behaviour": "escalate"})
    sandbox_actions.ensure_sandbox(agent)
    worker = start_worker("reconcile", "ingest", "default")
    eventually(lambda: ReconcileRun.objects.filter(agent=agent, result="converged").exists(),
               message=worker.output())
    bob = api_as(people.bob)
    response = bob.post("/api/v1/agents/refund-agent/waivers", {**WAIVER, "duration": "40s"},
                        format="json")
    assert response.status_code == 201, response.json()
    waiver = Waiver.objects.get(pk=response.json()["id"])

    # Live pass: the deployment's extra tool is waived, everything else is corrected.
    sandbox_actions.sandbox_deploy(agent, actor="dana", changes=BAD_DEPLOYMENT, reason="bad")
    eventually(lambda: not any(d["resource"] == "crm"
                               for d in SandboxAgent.objects.get(agent=agent).state["data"]),
               timeout=60, message=worker.output())
    assert "crm.search" in tools(agent)
    tool_finding = Finding.objects.get(agent=agent, pointer="/tools/crm.search",
                                       behaviour=False)
    assert tool_finding.status == "logged" and "CHG-1234" in tool_finding.reason

    # Live ingest: calling the waived tool is recorded and allowed, not escalated.
    sent = token_client(people, agent).post("/api/v1/events", crm_search_event(), format="json")
    assert sent.status_code == 200, sent.json()
    behaviour = eventually(lambda: Finding.objects.filter(
        agent=agent, pointer="/tools/crm.search", behaviour=True).first(),
        timeout=60, message=worker.output())
    assert behaviour.status == "logged" and "waiver" in behaviour.reason
    assert not Escalation.objects.filter(finding=behaviour).exists()

    # The periodic resync: its pass allows the same drift.
    runs = ReconcileRun.objects.filter(agent=agent, trigger="resync")
    assert resync() == 1
    eventually(runs.exists, timeout=60, message=worker.output())
    assert "crm.search" in tools(agent)

    # The backtest: the waived calls are not flagged.
    assert backtest_flags(bob, Agent.objects.get(pk=agent.pk), people) == 0

    # At its end, a scheduled pass enforces it again and the audit says the waiver lapsed.
    lapsed = eventually(lambda: ReconcileRun.objects.filter(
        agent=agent, trigger="waiver_lapsed").first(), timeout=90, message=worker.output())
    eventually(lambda: "crm.search" not in tools(agent), timeout=60, message=worker.output())
    entry = AuditEntry.objects.get(action="waiver.lapsed")
    assert (entry.actor, entry.target) == ("system:reconciler", f"waiver:{waiver.pk}")
    assert lapsed.started_at >= waiver.expires_at
    assert backtest_flags(bob, Agent.objects.get(pk=agent.pk), people) == 1


@pytest.mark.django_db
def test_a_waiver_is_granted_with_a_reason_and_a_ticket_and_is_audited(people, api_as):
    approved_agent(people, "refund-agent")
    response = api_as(people.dana).post("/api/v1/agents/refund-agent/waivers", WAIVER,
                                        format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["pointer"], body["ticket"], body["granted_by"], body["lapsed_at"]) == (
        "/tools/crm.search", "CHG-1234", "dana", None)
    entry = AuditEntry.objects.get(action="waiver.granted")
    assert (entry.actor, entry.agent, entry.reason) == (
        "dana", "refund-agent", "CHG-1234: CRM lookups during the migration")
    listed = api_as(people.alice).get("/api/v1/agents/refund-agent/waivers").json()
    assert [w["id"] for w in listed] == [body["id"]]


@pytest.mark.django_db
@pytest.mark.parametrize("who, status", [("alice", 403), ("anonymous", 401),
                                         ("agent_token", 403)])
def test_the_owner_and_the_agent_cannot_waive_their_own_enforcement(people, api_as, who,
                                                                     status):
    from rest_framework.test import APIClient

    agent = approved_agent(people, "refund-agent")
    client = {"alice": lambda: api_as(people.alice), "anonymous": APIClient,
              "agent_token": lambda: token_client(people, agent)}[who]()
    before = snapshot()
    response = client.post("/api/v1/agents/refund-agent/waivers", WAIVER, format="json")
    assert response.status_code == status
    assert snapshot() == before


@pytest.mark.django_db
@pytest.mark.parametrize("change, status, pointer", [
    ({"pointer": "tools"}, 422, "/pointer"),
    ({"pointer": "/a/b/c/d/e"}, 422, "/pointer"),
    ({"duration": "31d"}, 422, "/duration"),
    ({"duration": "soon"}, 422, "/duration"),
    ({"reason": "   "}, 400, "/reason"),
    ({"ticket": ""}, 400, "/ticket"),
    ({"ticket": "x" * 101}, 400, "/ticket"),
])
def test_bad_waivers_change_nothing(people, api_as, change, status, pointer):
    approved_agent(people, "refund-agent")
    bob = api_as(people.bob)
    before = snapshot()
    response = bob.post("/api/v1/agents/refund-agent/waivers", {**WAIVER, **change},
                        format="json")
    assert response.status_code == status, response.json()
    assert pointer in [d["pointer"] for d in response.json()["error"]["details"]]
    assert snapshot() == before


@pytest.mark.django_db
def test_waiving_an_unknown_agent_is_not_found(people, api_as):
    response = api_as(people.bob).post("/api/v1/agents/nobody/waivers", WAIVER, format="json")
    assert response.status_code == 404
