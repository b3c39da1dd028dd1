"""The backtest of a proposal: the agent's past events replayed against the active version and
the proposal by the live rules (tools, data with grants as they were, sign-off thresholds that
a human's decision covers, maximums, rate and same-record windows), counted per rule."""

import uuid
from datetime import UTC, datetime, timedelta

from rest_framework.test import APIClient

from reconciliation import actions
from reconciliation.models import Escalation
from registry import actions as registry_actions
from registry.models import Agent
from runtime.behaviour import backtest
from runtime.events import Event
from tests.conftest import approved_with_client, refund_manifest

T = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)  # the crm grant of the active version ends here
DATA = [{"resource": "customers_db", "access": "read"},
        {"resource": "orders_db", "access": "read"},
        {"resource": "payments", "access": "write"}]


def spec(**changes) -> dict:
    base = {"data": DATA, "grants": [{"resource": "crm", "access": "read",
                                      "expires_at": "2026-03-02T12:00:00Z", "reason": "audit"}],
            "limits": [{"resource": "customers_db", "max_calls": 5, "per": "1h"},
                       {"resource": "customers_db", "max_same_record": 2, "per": "1h"}]}
    return refund_manifest(**{**base, **changes}).spec


def at(minutes: int, kind: str, **fields) -> Event:
    return Event(id=uuid.uuid4().hex, agent="refund-agent", ts=T + timedelta(minutes=minutes),
                 kind=kind, **fields)


def test_each_rule_is_counted_for_the_active_version_and_the_proposal():
    active = spec()
    proposed = spec(
        tools=["crm.search", "orders.lookup", "payments.refund"],
        actions={"payments.refund": {"approval_above": 1000, "max": 5000}},
        limits=[{"resource": "customers_db", "max_calls": 3, "per": "1h"},
                {"resource": "customers_db", "max_same_record": 4, "per": "1h"}],
        grants=[{"resource": "crm", "access": "read", "expires_at": "2026-03-03T12:00:00Z",
                 "reason": "audit extended"}])
    refund = lambda minutes, amount, **f: at(minutes, "action",  # noqa: E731
                                             action="payments.refund", amount=amount, **f)
    read = lambda minutes, record: at(minutes, "data_access",  # noqa: E731
                                      resource="customers_db", record=record)
    signed_700 = refund(-50, 700, decision_id="d1")
    reused = refund(-45, 650, decision_id="d1")
    events = [
        signed_700, reused, refund(-44, 800), refund(-43, 1200), refund(-42, 6000),
        refund(-41, 300),
        read(-40, "c1"), read(-39, "c1"), read(-38, "c1"), read(-37, "c1"), read(-36, "c2"),
        read(-35, "c3"),
        at(-30, "tool_call", tool="crm.search"), at(-29, "tool_call", tool="crm.search"),
        at(-20, "data_access", resource="crm"),  # the grant is still live
        at(10, "data_access", resource="crm"),  # expired under the active version only
        read(120, "c1"),  # two hours on: the windows have moved
    ]
    signed = {signed_700.id: (True, False), reused.id: (False, True)}
    result = backtest(active, proposed, events, signed)
    assert [(r["kind"], r["pointer"], r["current"], r["proposed"]) for r in result["rules"]] == [
        ("action_above_max", "/actions/payments.refund/max", 1, 1),
        ("action_without_signoff", "/actions/payments.refund/approval_above", 2, 1),
        ("decision_reused", "/actions/payments.refund/approval_above", 1, 0),
        ("rate_limit_exceeded", "/limits/customers_db/max_calls", 1, 3),
        ("resource_not_approved", "/data/crm", 1, 0),
        ("same_record_exceeded", "/limits/customers_db/max_same_record", 2, 0),
        ("tool_not_approved", "/tools/crm.search", 2, 0),
    ]
    assert [c["text"] for c in result["changes"]] == [
        "would have allowed 1 payments.refund action above $500 without a human sign-off",
        "would have allowed 1 payments.refund action on an already used sign-off",
        "would have flagged 2 more calls to customers_db over 3 per 1h",
        "would have allowed 1 access to crm, outside the approved data",
        "would have allowed 2 reads of one customers_db record over 2 per 1h",
        "would have allowed 2 calls of crm.search, a tool outside the approved set",
    ]
    assert result["rules"][3]["rule"] == "calls to customers_db over 5 per 1h"


def test_a_new_agent_is_backtested_against_nothing_approved():
    events = [at(0, "tool_call", tool="orders.lookup")]
    result = backtest(None, spec(), events, {})
    assert result["changes"] == [{
        "kind": "tool_not_approved", "pointer": "/tools/orders.lookup", "current": 1,
        "proposed": 0,
        "text": "would have allowed 1 call of orders.lookup, a tool outside the approved set"}]


def register(people) -> tuple[Agent, APIClient]:
    return approved_with_client(people, data=DATA)


def refund_event(amount: float, **extra) -> dict:
    return {"id": uuid.uuid4().hex, "agent": "refund-agent", "ts": datetime.now(UTC).isoformat(),
            "kind": "action", "action": "payments.refund", "amount": amount, **extra}


def test_the_proposal_page_and_api_do_not_count_a_signed_off_refund(people, api_as,
                                                                    redis_client):
    agent, client = register(people)
    asked = client.post("/api/v1/agents/refund-agent/decisions",
                        {"action": "payments.refund", "amount": 700}, format="json").json()
    actions.resolve_escalation(Escalation.objects.get(decision_id=asked["id"]).pk,
                               actor=people.bob, resolution="allow", comment="damaged TV")
    sent = client.post("/api/v1/events", [
        refund_event(700, decision_id=asked["id"]), refund_event(800), refund_event(1200),
        refund_event(300)], format="json")
    assert sent.json()["accepted"] == 4
    proposal = registry_actions.propose(
        agent, refund_manifest(data=DATA, actions={
            "payments.refund": {"approval_above": 1000, "max": 5000}}).spec,
        agent.active_version.metadata, actor=people.alice, source="api").version
    body = api_as(people.bob).get(f"/api/v1/proposals/{proposal.pk}/backtest").json()
    assert (body["days"], body["events"], body["total"], body["capped"]) == (7, 4, 4, False)
    # The $700 refund had a human's sign-off: only $800 and $1,200 needed one, and the
    # proposal still holds the $1,200 one.
    assert body["rules"] == [{
        "kind": "action_without_signoff", "pointer": "/actions/payments.refund/approval_above",
        "current": 2, "proposed": 1,
        "rule": "payments.refund actions above $500 without a human sign-off"}]
    assert body["changes"] == [{
        "kind": "action_without_signoff", "pointer": "/actions/payments.refund/approval_above",
        "current": 2, "proposed": 1,
        "text": "would have allowed 1 payments.refund action above $500 without a human "
                "sign-off"}]
    browser = APIClient()
    browser.force_login(people.bob)
    page = browser.get(f"/proposals/{proposal.pk}/").content.decode()
    assert ("This change would have allowed 1 payments.refund action above $500 without a "
            "human sign-off.") in page
    assert "Capped" not in page


def test_a_long_history_is_capped_and_the_page_says_so(people, api_as, redis_client, settings):
    settings.BACKTEST_MAX_EVENTS = 3
    agent, client = register(people)
    client.post("/api/v1/events", [refund_event(800) for _ in range(5)], format="json")
    proposal = registry_actions.propose(
        agent, refund_manifest(data=DATA, actions={
            "payments.refund": {"approval_above": 1000, "max": 5000}}).spec,
        agent.active_version.metadata, actor=people.alice, source="api").version
    body = api_as(people.bob).get(f"/api/v1/proposals/{proposal.pk}/backtest").json()
    assert (body["events"], body["total"], body["capped"], body["cap"]) == (3, 5, True, 3)
    assert [c["text"] for c in body["changes"]] == [
        "would have allowed 3 payments.refund actions above $500 without a human sign-off"]
    browser = APIClient()
    browser.force_login(people.bob)
    page = browser.get(f"/proposals/{proposal.pk}/").content.decode()
    assert "Capped: only the latest 3 of the agent's 5 events" in page
