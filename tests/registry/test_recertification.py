"""Recertification through the API: every approved state carries a review date (compliance's
interval for its risk level, or the proposer's own); the owner is reminded before it; at it the
agent shows Recertified=False, its approvers get an escalation and the guardrails decide what
it gets; recertifying is a proposal of the same spec, approved like any change, that resets
the date. The timed steps run here through the jobs' own actions at a given `now`; the test on
real workers (test_recertification_on_workers.py) waits for the scheduled jobs."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from reconciliation import actions as reconciliation
from reconciliation.choices import EscalationStatus
from reconciliation.models import AlertEvent, Escalation
from registry import actions
from registry.actions.recertification import mark_overdue, remind_owner
from registry.models import Agent
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import approved_agent, make_person, refund_manifest, token_client

DAY = 86_400


def recertified(client, name="refund-agent") -> dict:
    conditions = client.get(f"/api/v1/agents/{name}").json()["conditions"]
    return next(c for c in conditions if c["type"] == "Recertified")


def later(agent: Agent, **delta) -> timezone.datetime:
    return Agent.objects.get(pk=agent.pk).review_due_at + timedelta(**delta)


def test_an_approved_state_gets_the_review_date_of_its_risk_level(people, api_as):
    agent = approved_agent(people, "refund-agent")  # whole-spec risk 40: medium
    approved_at = agent.active_version.decided_at
    assert agent.review_due_at == approved_at + timedelta(days=180)
    condition = recertified(api_as(people.alice))
    assert condition["status"] == "True" and condition["reason"] == "ReviewScheduled"
    shown = api_as(people.alice).get("/api/v1/agents/refund-agent").json()["review_due_at"]
    assert shown.replace("Z", "+00:00") == agent.review_due_at.isoformat()
    intervals = api_as(people.alice).get("/api/v1/review-intervals").json()
    assert intervals == [{"level": "high", "interval": "90d", "risk_from": 60},
                         {"level": "medium", "interval": "180d", "risk_from": 30},
                         {"level": "low", "interval": "365d", "risk_from": 0}]


def test_compliance_sets_an_interval_and_new_approvals_use_it(people, api_as):
    dana = api_as(people.dana)
    changed = dana.put("/api/v1/review-intervals/medium", {"interval": "30d"}, format="json")
    assert changed.status_code == 200, changed.json()
    assert changed.json()[1] == {"level": "medium", "interval": "30d", "risk_from": 30}
    entry = AuditEntry.objects.get(action="review_interval.changed")
    assert entry.actor == "dana" and entry.before["interval"] == "180d"
    assert entry.after == {"interval": "30d", "risk_from": 30}
    agent = approved_agent(people, "refund-agent")
    assert agent.review_due_at == agent.active_version.decided_at + timedelta(days=30)


@pytest.mark.parametrize("who", ["alice", "bob", "carol"])
def test_only_compliance_sets_review_intervals(people, api_as, who):
    answer = api_as(getattr(people, who)).put("/api/v1/review-intervals/high",
                                              {"interval": "1d"}, format="json")
    assert answer.status_code == 403
    assert not AuditEntry.objects.filter(action="review_interval.changed").exists()


@pytest.mark.parametrize("level, body, field", [
    ("high", {"interval": "soon"}, "interval"),
    ("high", {"interval": "0d"}, "interval"),
    ("high", {"interval": "4000d"}, "interval"),
    ("high", {"interval": "9d", "risk_from": 0}, "risk_from"),
    ("urgent", {"interval": "9d"}, "level"),
])
def test_bad_review_intervals_are_refused_and_change_nothing(people, api_as, level, body, field):
    answer = api_as(people.dana).put(f"/api/v1/review-intervals/{level}", body, format="json")
    assert answer.status_code == 400, answer.json()
    assert answer.json()["error"]["details"][0]["pointer"] == f"/{field}"
    assert not AuditEntry.objects.filter(action="review_interval.changed").exists()


def test_risk_levels_stay_in_order(people, api_as):
    dana = api_as(people.dana)
    for level, risk in (("high", 30), ("medium", 60)):
        answer = dana.put(f"/api/v1/review-intervals/{level}",
                          {"interval": "9d", "risk_from": risk}, format="json")
        assert answer.status_code == 422, answer.json()
        assert answer.json()["error"]["details"][0]["pointer"] == "/risk_from"
    assert not AuditEntry.objects.filter(action="review_interval.changed").exists()


def test_a_proposal_may_give_its_own_review_date(people, api_as):
    agent = approved_agent(people, "refund-agent")
    alice, bob = api_as(people.alice), api_as(people.bob)
    spec = refund_manifest(model="gpt-5").spec
    proposed = alice.post("/api/v1/agents/refund-agent/proposals",
                          {"spec": spec, "review_after": "45d"}, format="json")
    assert proposed.status_code == 201, proposed.json()
    approved = bob.post(f"/api/v1/proposals/{proposed.json()['proposal']}/approve", {},
                        format="json")
    assert approved.status_code == 200
    agent.refresh_from_db()
    assert agent.review_due_at == agent.active_version.decided_at + timedelta(days=45)

    by = (timezone.now() + timedelta(days=10)).replace(microsecond=0)
    proposed = alice.post("/api/v1/agents/refund-agent/recertify",
                          {"review_by": by.isoformat().replace("+00:00", "Z")}, format="json")
    assert proposed.status_code == 201, proposed.json()
    bob.post(f"/api/v1/proposals/{proposed.json()['proposal']}/approve", {}, format="json")
    assert Agent.objects.get(pk=agent.pk).review_due_at == by


@pytest.mark.parametrize("body, pointer", [
    ({"review_after": "soon"}, "/review_after"),
    ({"review_after": "4000d"}, "/review_after"),
    ({"review_by": "2020-01-01T00:00:00Z"}, "/review_by"),
    ({"review_by": "next tuesday"}, "/review_by"),
    ({"review_after": "5d", "review_by": "2099-01-01T00:00:00Z"}, "/review_by"),
])
def test_bad_review_dates_are_refused_with_their_field_and_propose_nothing(
        people, api_as, body, pointer):
    agent = approved_agent(people, "refund-agent")
    before = agent.versions.count()
    alice = api_as(people.alice)
    for answer in (
            alice.post("/api/v1/agents/refund-agent/proposals",
                       {"spec": refund_manifest(model="gpt-5").spec, **body}, format="json"),
            alice.post("/api/v1/agents/refund-agent/recertify", body, format="json")):
        assert answer.status_code == 400, answer.json()
        error = answer.json()["error"]
        assert error["code"] == "invalid_review_date"
        assert error["details"][0]["pointer"] == pointer
    assert agent.versions.count() == before


def test_the_owner_is_reminded_once_before_the_date(people, api_as):
    agent = approved_agent(people, "refund-agent")
    assert remind_owner(agent.pk, now=later(agent, days=-15)) is False  # not yet
    assert remind_owner(agent.pk, now=later(agent, days=-13)) is True
    assert remind_owner(agent.pk, now=later(agent, days=-12)) is False  # once per date
    alert = AlertEvent.objects.get(event="recertification.due")
    assert alert.owner_id == people.alice.pk and alert.agent_name == "refund-agent"
    entry = AuditEntry.objects.get(action="recertification.due")
    assert entry.actor == "system:recertification" and "alice was reminded" in entry.reason
    # The owner's list of what is due: their agents only.
    other = make_person("olga", "owner")
    approved_agent(people, "crm-agent")
    Agent.objects.filter(name="crm-agent").update(owner=other)
    rows = api_as(people.alice).get("/api/v1/recertification").json()
    assert [r["agent"] for r in rows] == ["refund-agent"]


def test_at_the_date_the_agent_is_overdue_and_its_approvers_get_an_escalation(people, api_as):
    agent = approved_agent(people, "refund-agent")
    assert mark_overdue(agent.pk, now=later(agent, seconds=-1)) is False
    assert mark_overdue(agent.pk, now=later(agent, seconds=1)) is True
    assert mark_overdue(agent.pk, now=later(agent, seconds=2)) is False
    condition = recertified(api_as(people.alice))
    assert condition["status"] == "False" and condition["reason"] == "ReviewOverdue"
    escalation = Escalation.objects.get(agent=agent)
    assert escalation.kind == "recertification" and escalation.status == "open"
    bob = api_as(people.bob)
    listed = bob.get("/api/v1/escalations").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [(e["kind"], e["agent"]) for e in rows] == [("recertification", "refund-agent")]
    entry = AuditEntry.objects.get(action="recertification.overdue")
    assert entry.after["effect"] == "warn" and "passed without recertification" in entry.reason
    assert Agent.objects.get(pk=agent.pk).lifecycle == "active"  # warn changes nothing else
    (row,) = bob.get("/api/v1/recertification?state=overdue").json()
    assert row["agent"] == "refund-agent" and row["overdue_effect"] == "warn"


def guardrail(dana_client, **fields) -> None:
    body = {"name": "prod-review", "expression": "true", "effect": "warn",
            "message": "reviewed", "selector": {}, **fields}
    answer = dana_client.post("/api/v1/guardrails", body, format="json")
    assert answer.status_code == 201, answer.json()


def test_restrict_keeps_only_the_safe_tools_until_recertified(people, api_as):
    agent = approved_agent(people, "refund-agent")
    guardrail(api_as(people.dana), overdue_effect="restrict", safe_tools=["orders.lookup"])
    own = token_client(people, agent)

    def ask(tool: str) -> str:
        answer = own.post("/api/v1/agents/refund-agent/decisions",
                          {"tool": tool, "arguments": {"order": "A-1", "amount": 100}},
                          format="json")
        assert answer.status_code == 201, answer.json()
        return answer.json()["outcome"]

    assert ask("payments.refund") == "allow"
    sandbox_actions.ensure_sandbox(agent)
    mark_overdue(agent.pk, now=later(agent, seconds=1))
    assert ask("payments.refund") == "deny"  # not in the safe subset
    assert ask("orders.lookup") == "allow"
    # The reconciler takes the other tools away on the platform.
    reconciliation.reconcile_agent(agent.pk, trigger="manual")
    assert SandboxAgent.objects.get(agent=agent).state["tools"] == ["orders.lookup"]
    (row,) = api_as(people.dana).get("/api/v1/recertification").json()
    assert row["restricted_to"] == ["orders.lookup"] and row["overdue_effect"] == "restrict"

    alice, bob = api_as(people.alice), api_as(people.bob)
    proposed = alice.post("/api/v1/agents/refund-agent/recertify",
                          {"comment": "still refunds damaged orders"}, format="json")
    assert proposed.status_code == 201, proposed.json()
    assert proposed.json()["changes"] == [] and proposed.json()["diff"] == []
    shown = alice.get(f"/api/v1/proposals/{proposed.json()['proposal']}").json()
    assert shown["recertifies"] is True and shown["review_after_seconds"] is None
    bob.post(f"/api/v1/proposals/{proposed.json()['proposal']}/approve", {}, format="json")
    assert ask("payments.refund") == "allow"
    reconciliation.reconcile_agent(agent.pk, trigger="manual")  # and gives them back
    assert SandboxAgent.objects.get(agent=agent).state["tools"] == ["orders.lookup",
                                                                   "payments.refund"]
    assert recertified(alice)["status"] == "True"
    assert Escalation.objects.get(agent=agent).status == EscalationStatus.RESOLVED


def test_restrict_needs_safe_tools(people, api_as):
    answer = api_as(people.dana).post("/api/v1/guardrails", {
        "name": "prod-review", "expression": "true", "effect": "warn", "message": "m",
        "overdue_effect": "restrict"}, format="json")
    assert answer.status_code == 422
    assert answer.json()["error"]["details"][0]["pointer"] == "/safe_tools"


def test_suspend_stops_the_agent_and_recertifying_resumes_it_with_a_new_date(people, api_as):
    agent = approved_agent(people, "refund-agent")
    guardrail(api_as(people.dana), overdue_effect="suspend")
    first_due = agent.review_due_at
    mark_overdue(agent.pk, now=later(agent, seconds=1))
    assert Agent.objects.get(pk=agent.pk).lifecycle == "suspended"

    alice, bob = api_as(people.alice), api_as(people.bob)
    proposed = alice.post("/api/v1/agents/refund-agent/recertify",
                          {"comment": "reviewed with the payments team"}, format="json")
    pk = proposed.json()["proposal"]
    assert alice.post(f"/api/v1/proposals/{pk}/approve", {}, format="json").status_code == 403
    again = alice.post("/api/v1/agents/refund-agent/recertify", {}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "pending"
    assert bob.post(f"/api/v1/proposals/{pk}/approve", {}, format="json").status_code == 200
    agent.refresh_from_db()
    assert agent.lifecycle == "active" and agent.generation == 2
    assert agent.active_version.spec == agent.versions.get(generation=1).spec
    assert agent.review_due_at > first_due and agent.overdue_at is None
    recert = AuditEntry.objects.get(action="agent.recertified")
    assert recert.actor == "bob" and recert.reason == "reviewed with the payments team"
    assert recert.after["proposal"] == pk
    resumed = AuditEntry.objects.get(action="agent.resumed")
    assert "overdue suspension ends" in resumed.reason


@pytest.mark.parametrize("who, status", [("bob", 403), ("dana", 403), ("stranger", 403),
                                         ("agent", 403)])
def test_only_the_owner_proposes_a_recertification(people, api_as, who, status):
    agent = approved_agent(people, "refund-agent")
    client = (token_client(people, agent) if who == "agent" else
              api_as(make_person("stranger", "owner")) if who == "stranger" else
              api_as(getattr(people, who)))
    answer = client.post("/api/v1/agents/refund-agent/recertify", {}, format="json")
    assert answer.status_code == status
    assert agent.versions.count() == 1


def test_an_unknown_or_unapproved_agent_cannot_be_recertified(people, api_as):
    alice = api_as(people.alice)
    assert alice.post("/api/v1/agents/ghost/recertify", {}, format="json").status_code == 404
    actions.apply_manifests([refund_manifest()], actor=people.alice, source="yaml")
    answer = alice.post("/api/v1/agents/refund-agent/recertify", {}, format="json")
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "not_approved"


def test_the_report_lists_agents_by_review_date_and_exports_csv(people, api_as):
    first = approved_agent(people, "refund-agent")
    second = approved_agent(people, "crm-agent")
    Agent.objects.filter(pk=second.pk).update(review_due_at=first.review_due_at
                                              - timedelta(days=1))
    mark_overdue(second.pk, now=later(second, seconds=1))
    bob = api_as(people.bob)
    rows = bob.get("/api/v1/recertification").json()
    assert [(r["agent"], r["state"]) for r in rows] == [("crm-agent", "overdue"),
                                                      ("refund-agent", "scheduled")]
    assert bob.get("/api/v1/recertification?state=late").status_code == 400
    assert bob.get("/api/v1/recertification?format=xml").status_code == 400
    csv = bob.get("/api/v1/recertification?format=csv")
    assert csv["Content-Type"] == "text/csv"
    lines = csv.content.decode().splitlines()
    assert lines[0].startswith("agent,owner,generation,review_due_at,state")
    assert lines[1].startswith("crm-agent,alice,1,") and ",overdue," in lines[1]


def test_an_overdue_escalation_takes_suspend_only_and_closes_with_recertification(
        people, api_as):
    agent = approved_agent(people, "refund-agent")
    mark_overdue(agent.pk, now=later(agent, seconds=1))
    escalation = Escalation.objects.get(agent=agent)
    bob = api_as(people.bob)
    wrong = bob.post(f"/api/v1/escalations/{escalation.pk}/resolve",
                     {"resolution": "revert", "comment": "undo"}, format="json")
    assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "wrong_resolution"
    assert api_as(people.alice).post(f"/api/v1/escalations/{escalation.pk}/resolve",
                                     {"resolution": "suspend", "comment": "mine"},
                                     format="json").status_code == 403
    done = bob.post(f"/api/v1/escalations/{escalation.pk}/resolve",
                    {"resolution": "suspend", "comment": "nobody reviewed it"}, format="json")
    assert done.status_code == 200, done.json()
    assert Agent.objects.get(pk=agent.pk).lifecycle == "suspended"
