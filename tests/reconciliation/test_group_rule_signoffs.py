"""Refunds by all team=payments agents above $20,000 an hour need two sign-offs: a decision
request that would take the team's window over the limit waits for two distinct approvers,
one under it is allowed as before, and the owner or the same approver twice cannot make up
the pair."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from audit.models import AuditEntry
from config.errors import Conflict, NotAllowed
from reconciliation import actions
from reconciliation.models import Escalation
from runtime import actions as runtime_actions
from runtime.actions.group_rules import create_group_rule
from runtime.models import Decision
from tests.conftest import approved_agent, token_client

SPEC = {"data": [{"resource": "payments", "access": "write"}], "limits": [],
        "actions": {"payments.refund": {"max": 50000}}}


@pytest.fixture
def payments(people, redis_client):
    pay_a = approved_agent(people, "pay-a", **SPEC)
    pay_b = approved_agent(people, "pay-b", **SPEC)
    create_group_rule(actor=people.dana, name="payments-refunds", measure="amount",
                      limit=20000, per="1h", selector={"team": "payments"},
                      match={"kind": "action", "action": "payments.refund"},
                      required_approvals=2)
    now = datetime.now(UTC)
    runtime_actions.ingest_events([{"id": uuid.uuid4().hex, "agent": "pay-a", "kind": "action",
                            "action": "payments.refund", "amount": 7500,
                            "ts": (now - timedelta(minutes=m)).isoformat()} for m in (10, 20)],
                          actor=people.admin)
    return pay_a, pay_b


@pytest.mark.django_db
def test_a_refund_taking_the_team_over_20000_an_hour_waits_for_two_approvers(people,
                                                                              payments):
    _, pay_b = payments
    client = token_client(people, pay_b)
    small = client.post("/api/v1/agents/pay-b/decisions",
                        {"action": "payments.refund", "amount": 5000}, format="json").json()
    assert small["outcome"] == "allow"  # 15,000 + 5,000 is not above 20,000
    response = client.post("/api/v1/agents/pay-b/decisions",
                           {"action": "payments.refund", "amount": 6000}, format="json")
    held = response.json()
    assert (held["outcome"], held["status"], held["required_approvals"], held["approvals"]) == (
        "pending", "pending", 2, [])
    assert held["rule"].startswith("group rule payments-refunds: 15,000 already in the last 1h")
    escalation = Escalation.objects.get(decision_id=held["id"])
    actions.resolve_escalation(escalation.pk, actor=people.bob, resolution="allow",
                               comment="checked the order")
    decision = Decision.objects.get(pk=held["id"])
    assert (decision.status, decision.approvals) == ("pending", ["bob"])
    with pytest.raises(Conflict) as again:
        runtime_actions.decide_pending(held["id"], actor=people.bob, allow=True, comment="me again")
    assert again.value.code == "already_signed"
    with pytest.raises(NotAllowed):
        runtime_actions.decide_pending(held["id"], actor=people.alice, allow=True, comment="mine")
    actions.resolve_escalation(escalation.pk, actor=people.carol, resolution="allow",
                               comment="second pair of eyes")
    decision.refresh_from_db()
    assert (decision.status, decision.outcome, decision.approvals) == (
        "approved", "allow", ["bob", "carol"])
    assert decision.decided_by == people.carol
    assert Escalation.objects.get(pk=escalation.pk).status == "resolved"
    (signed,) = AuditEntry.objects.filter(action="decision.signed")
    assert signed.actor == "bob" and signed.after["approvals"] == ["bob"]


@pytest.mark.django_db
def test_one_rejection_ends_it_and_agents_outside_the_team_are_not_held(people, payments):
    other = approved_agent(people, "support", **SPEC)
    from registry.models import Agent

    Agent.objects.filter(pk=other.pk).update(labels={"team": "support"})
    other.refresh_from_db()
    free = runtime_actions.request_decision(other, {"action": "payments.refund", "amount": 9000},
                                    actor=people.admin)
    assert free.outcome == "allow"
    _, pay_b = payments
    held = runtime_actions.request_decision(pay_b, {"action": "payments.refund", "amount": 9000},
                                    actor=people.admin)
    assert held.status == "pending"
    runtime_actions.decide_pending(str(held.pk), actor=people.bob, allow=False, comment="no")
    held.refresh_from_db()
    assert (held.status, held.outcome) == ("rejected", "deny")
