"""A group rule's effect `block` through the API and the actions: compliance saves one, a
per-record block or an unknown effect is refused naming the field (nothing saved); the block
of a breach respects the cluster's shadow mode (recorded, not applied) but not an agent's own,
and it lifts (audited, agents resumed) once the rule no longer blocks."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.models import Finding
from registry.models import Agent
from runtime import actions as runtime_actions
from runtime.actions.group_blocks import block_involved, lift_group_block
from runtime.actions.group_rules import (
    create_group_rule,
    record_group_breach,
    update_group_rule,
)
from runtime.models import GroupBreach, GroupRule
from tests.conftest import approved_agent, shadow_on

SPEC = {"data": [{"resource": "payments", "access": "write"}], "limits": [],
        "actions": {"payments.refund": {"max": 50000}}}
TOKENS = {"name": "payments-tokens", "selector": {"team": "payments"},
          "match": {"kind": "model_call"}, "measure": "tokens", "limit": 10000, "per": "1h"}


@pytest.mark.django_db
def test_compliance_saves_a_block_rule_and_a_bad_effect_is_refused(people, api_as):
    dana = api_as(people.dana)
    created = dana.post("/api/v1/group-rules", {**TOKENS, "effect": "block"}, format="json")
    assert created.status_code == 201 and created.json()["effect"] == "block"
    assert dana.post("/api/v1/group-rules", {**TOKENS, "name": "x", "effect": "suspend"},
                     format="json").status_code == 400
    per_record = dana.post("/api/v1/group-rules", {
        "name": "reads", "match": {"kind": "data_access"}, "measure": "events", "limit": 5,
        "per": "1h", "per_record": True, "effect": "block"}, format="json")
    assert per_record.status_code == 422
    assert [d["pointer"] for d in per_record.json()["error"]["details"]] == ["/effect"]
    assert dana.patch("/api/v1/group-rules/payments-tokens", {"per_record": True},
                      format="json").status_code == 422
    assert list(GroupRule.objects.values_list("name", "effect", "per_record")) == [
        ("payments-tokens", "block", False)]
    alice = api_as(people.alice)  # an owner, not compliance
    assert alice.patch("/api/v1/group-rules/payments-tokens", {"effect": "log"},
                       format="json").status_code == 403


@pytest.mark.django_db
def test_a_block_under_shadow_is_recorded_and_the_block_lifts_when_the_rule_stops(
        people, redis_client):
    pay_a = approved_agent(people, "pay-a", **SPEC)
    pay_b = approved_agent(people, "pay-b", **SPEC)
    Agent.objects.update(labels={"team": "payments"})
    rule = create_group_rule(actor=people.dana, effect="block", **TOKENS)
    # the cluster's shadow mode holds a group block (it holds every agent alike); an agent's
    # own shadow mode does not (it would shield one owner from what others face)
    actions.set_shadow(actor=people.dana, enabled=True)
    shadow_on(people, pay_b)
    breach = record_group_breach({
        "rule_id": rule.pk, "key": "k", "group_key": "all", "seconds": 3600, "total": 12000,
        "agents": [pay_a.pk, pay_b.pk], "event_id": "e1", "trigger_agent": pay_b.pk,
        "warning": False, "window": "w1"})
    findings = Finding.objects.filter(kind="group_limit_exceeded")
    assert findings.count() == 2 and breach.escalation_id is None  # block: no escalation
    first, second = sorted(findings, key=lambda f: f.agent.name)
    block_involved(breach.pk, [first.pk])
    a = Finding.objects.get(agent=pay_a)
    assert a.status == "logged" and "not applied: shadow mode" in a.reason
    actions.set_shadow(actor=people.dana, enabled=False)
    block_involved(breach.pk, [second.pk])
    b = Finding.objects.get(agent=pay_b)
    assert b.status == "blocked"  # its own shadow mode did not shield it
    assert dict(Agent.objects.values_list("name", "lifecycle")) == {
        "pay-a": "active", "pay-b": "suspended"}
    update_group_rule(rule, actor=people.dana, enabled=False)
    assert lift_group_block(breach.pk) is True
    b.refresh_from_db()
    assert b.status == "resolved" and "no longer blocks" in b.reason
    assert Agent.objects.get(pk=pay_b.pk).lifecycle == "active"
    (lifted,) = AuditEntry.objects.filter(action="group_rule.lifted")
    assert lifted.after["resumed"] == ["pay-b"] and lifted.after["agents"] == ["pay-b"]
    assert AuditEntry.objects.filter(action="agent.resumed", agent="pay-b").count() == 1


def blocked_by_model_calls(people, calls: list[tuple[str, datetime, int]]):
    """pay-b (team payments) under a block rule of 10,000 tokens an hour, whose window holds
    `calls` (event id, time, tokens) and is over: the breach recorded and its agent blocked.
    Returns the breach and the window's key."""
    from runtime import group_windows
    from runtime.group_rules import AgentFacts, checks

    pay_b = approved_agent(people, "pay-b", **SPEC)
    Agent.objects.update(labels={"team": "payments"})
    rule = create_group_rule(actor=people.dana, effect="block", **TOKENS)
    facts = AgentFacts(pay_b.pk, "pay-b", "alice", {"team": "payments"})
    counted = []
    for event_id, ts, tokens in calls:
        call = SimpleNamespace(id=event_id, kind="model_call", ts=ts, input_tokens=tokens,
                               output_tokens=0)
        (check,) = checks([rule.to_spec()], facts, call)
        counted.append((check, ts))
    group_windows.fill(counted, datetime.now(UTC))
    epoch, _ = group_windows.filled([(rule.pk, rule.revision)])
    group_windows.mark_filled(rule.pk, rule.revision, 3600, epoch)
    key = counted[0][0].key
    breach = record_group_breach({
        "rule_id": rule.pk, "key": key, "group_key": "all", "seconds": 3600,
        "total": sum(tokens for _, _, tokens in calls), "agents": [pay_b.pk],
        "event_id": calls[-1][0], "trigger_agent": pay_b.pk, "warning": False, "window": "w1"})
    block_involved(breach.pk, list(Finding.objects.values_list("pk", flat=True)))
    return breach, key


@pytest.mark.django_db
def test_a_block_does_not_lift_while_the_window_is_still_over(people, redis_client):
    breach, _ = blocked_by_model_calls(people, [("e1", datetime.now(UTC), 12000)])
    assert lift_group_block(breach.pk) is False
    assert Finding.objects.get().status == "blocked"
    assert Agent.objects.get().lifecycle == "suspended"
    assert not AuditEntry.objects.filter(action="group_rule.lifted").exists()
    denied = runtime_actions.request_decision(Agent.objects.get(), {"action": "payments.refund",
                                                            "amount": 1}, actor=people.alice)
    assert (denied.outcome, denied.rule) == ("deny", "lifecycle: pay-b is suspended")
    assert GroupBreach.objects.count() == 1
    import django_rq

    scheduled = django_rq.get_queue("default").scheduled_job_registry
    jobs = [django_rq.get_queue("default").fetch_job(i) for i in scheduled.get_job_ids()]
    # One look when the window can fall back, one more after it was still over.
    assert [j.func_name for j in jobs].count(
        "runtime.jobs.lift_group_block_job") == 2


@pytest.mark.django_db
def test_the_window_is_looked_at_again_when_the_events_that_pushed_it_over_leave_it(
        people, redis_client):
    """A block lasts until the window falls back, not a whole window from the breach: events
    sent late (or over the hour) leave it sooner, and the look is scheduled then."""
    import django_rq

    from runtime import group_windows

    now = datetime.now(UTC)
    old, recent = now - timedelta(minutes=50), now - timedelta(minutes=10)
    _, key = blocked_by_model_calls(people, [("e1", old, 6000), ("e2", recent, 5000)])

    queue = django_rq.get_queue("default")
    scheduled = queue.scheduled_job_registry
    (look,) = [queue.fetch_job(i) for i in scheduled.get_job_ids()]
    assert look.func_name == "runtime.jobs.lift_group_block_job"
    # 11,000 comes back to 5,000 when the 6,000 of 50 minutes ago leaves: in 10 minutes, not
    # an hour after the breach
    when = scheduled.get_scheduled_time(look)
    assert old + timedelta(hours=1) <= when <= old + timedelta(hours=1, seconds=2)
    assert group_windows.falls_back_at(key, 3600, 10000, old + timedelta(hours=1, seconds=1)
                                       ) == old + timedelta(hours=1, seconds=1)  # it has


@pytest.mark.django_db
def test_a_block_whose_scheduled_look_was_lost_is_lifted_by_the_sweep(people, redis_client):
    """Redis lost the look scheduled for when the window falls back (a failover, a restart
    from disk): the agents stayed suspended for good. The sweep lifts each block whose window
    is back under, leaves one still over as it is, and schedules nothing of its own."""
    import django_rq

    from runtime.actions.group_blocks import lift_overdue_group_blocks

    now = datetime.now(UTC)
    breach, _ = blocked_by_model_calls(people, [("e1", now - timedelta(minutes=50), 12000)])
    queue = django_rq.get_queue("default")
    for job_id in queue.scheduled_job_registry.get_job_ids():  # the look is lost
        queue.scheduled_job_registry.remove(job_id, delete_job=True)
    assert lift_overdue_group_blocks(now) == 0  # still over: 12,000 in the last hour
    assert (Finding.objects.get().status, Agent.objects.get().lifecycle) == (
        "blocked", "suspended")
    assert queue.scheduled_job_registry.get_job_ids() == []
    assert lift_overdue_group_blocks(now + timedelta(minutes=11)) == 1  # the calls left it
    assert (Finding.objects.get().status, Agent.objects.get().lifecycle) == (
        "resolved", "active")
    assert AuditEntry.objects.filter(action="group_rule.lifted").count() == 1
    assert lift_overdue_group_blocks(now + timedelta(minutes=12)) == 0  # nothing left blocked


@pytest.mark.django_db
def test_the_sweep_reads_only_the_breaches_of_blocked_rules_since_they_blocked(
        people, redis_client, monkeypatch):
    """Breach rows stay for history (one per window over the limit, across every group and
    rule): the sweep looks only at those of the blocked findings' rules seen since they were
    blocked, not at last month's or another rule's."""
    from runtime.actions import group_blocks

    now = datetime.now(UTC)
    breach, _ = blocked_by_model_calls(people, [("e1", now - timedelta(minutes=50), 12000)])
    other = create_group_rule(actor=people.dana, **{**TOKENS, "name": "all-tokens",
                                                    "selector": {}})
    month = now - timedelta(days=30)
    GroupBreach.objects.bulk_create(
        [GroupBreach(rule=breach.rule, group_key="all", window=f"w-old-{i}", total=2.0,
                     agents=["pay-b"], opened_at=month, last_seen=month) for i in range(100)]
        + [GroupBreach(rule=other, group_key="all", window=f"w-{i}", total=2.0, agents=[])
           for i in range(100)])
    looked_at = []
    fingerprint = group_blocks._fingerprint
    monkeypatch.setattr(group_blocks, "_fingerprint",
                        lambda rule, seen: looked_at.append(seen.pk) or fingerprint(rule, seen))
    assert group_blocks.lift_overdue_group_blocks(now + timedelta(minutes=11)) == 1
    assert set(looked_at) == {breach.pk}
