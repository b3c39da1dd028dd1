"""The runtime's and the sandbox's models moved out of reconciliation without touching a table:
a database full of events (in their day partitions on PostgreSQL), decisions, unregistered
agents, group rules, breaches, outbox batches and sandbox agents migrates up and down across
the move with every row, relation, index and constraint as it was, and rows written by the
code of before the move are read by the code of after it."""

from datetime import timedelta

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from reconciliation import partitions
from reconciliation.models import Escalation, ObservedState
from runtime.models import (
    BehaviourEvent,
    Decision,
    GroupBreach,
    GroupRule,
    UncountedBatch,
    UnregisteredAgent,
)
from sandbox.models import SandboxAgent
from tests.migrating import latest, migrate

BEFORE = [("reconciliation", "0029_health_retired")]
MOVED = {BehaviourEvent: "runtime", UncountedBatch: "runtime", UnregisteredAgent: "runtime",
         Decision: "runtime", GroupRule: "runtime", GroupBreach: "runtime",
         SandboxAgent: "sandbox"}
TABLES = sorted(model._meta.db_table for model in MOVED) + [
    ObservedState._meta.db_table, Escalation._meta.db_table]


def schema() -> dict[str, dict]:
    """Every column, index and constraint of the tables the move concerns."""
    with connection.cursor() as cursor:
        return {table: {"columns": sorted(
                    (c.name, c.type_code, c.null_ok) for c in
                    connection.introspection.get_table_description(cursor, table)),
                        "constraints": connection.introspection.get_constraints(cursor, table)}
                for table in TABLES}


def old_model(name: str):
    """A model as the migrations before the move knew it, in reconciliation."""
    return MigrationExecutor(connection).loader.project_state(BEFORE).apps.get_model(
        "reconciliation", name)


def fill(agent, people) -> dict[str, object]:
    """One row of each moved model, linked as the product links them."""
    now = timezone.now()
    events = [BehaviourEvent.objects.create(
        event_id=f"e-{days}", agent=agent, agent_name=agent.name, ts=now - timedelta(days=days),
        kind="tool_call", tool="orders.lookup") for days in (3, 0)]
    batch = UncountedBatch.objects.create(received_at=now, events=[e.pk for e in events],
                                          first_ts=events[0].ts, last_ts=events[1].ts)
    shadow = UnregisteredAgent.objects.create(name="math-tutor", display_name="Math Tutor")
    seen = ObservedState.objects.create(unregistered=shadow, state={"tools": []},
                                        state_sha256="0" * 64, source="push",
                                        reported_by="math-tutor")
    decision = Decision.objects.create(
        agent=agent, request={"action": "payments.refund", "amount": 900},
        request_sha256="1" * 64, outcome="pending", status="pending", rule="approval_above",
        generation=1, asked_by=people.alice)
    escalation = Escalation.objects.create(agent=agent, decision=decision, reason="$900")
    rule = GroupRule.objects.create(name="refunds-per-team", created_by=people.dana,
                                    measure="amount", limit=5000, per="1h")
    breach = GroupBreach.objects.create(rule=rule, group_key="team:payments", window="w-1",
                                        total=6000, agents=[agent.name], escalation=escalation)
    sandbox, _ = SandboxAgent.objects.update_or_create(agent=agent,
                                                       defaults={"state": {"tools": ["a"]}})
    return {"events": sorted(e.pk for e in events), "batch": batch.pk, "shadow": shadow.pk,
            "seen": seen.pk, "decision": decision.pk, "escalation": escalation.pk,
            "rule": rule.pk, "breach": breach.pk, "sandbox": sandbox.pk}


@pytest.mark.django_db(transaction=True)
def test_the_move_keeps_every_row_and_table_down_and_up(refund_agent, people):
    made = fill(refund_agent, people)
    before = schema()

    migrate(BEFORE)
    try:
        assert schema() == before
        # The code of before the move reads what the code of after it wrote, and writes more.
        old_decision = old_model("Decision").objects.get(pk=made["decision"])
        assert old_decision.request["amount"] == 900
        assert old_model("Escalation").objects.get(pk=made["escalation"]).decision_id == \
            made["decision"]
        assert old_model("ObservedState").objects.get(pk=made["seen"]).unregistered_id == \
            made["shadow"]
        assert old_model("GroupBreach").objects.get(pk=made["breach"]).rule_id == made["rule"]
        assert sorted(old_model("BehaviourEvent").objects.values_list("pk", flat=True)) == \
            made["events"]
        assert old_model("UncountedBatch").objects.get(pk=made["batch"]).events
        old_model("BehaviourEvent").objects.create(
            event_id="written-before", agent_id=refund_agent.pk, agent_name=refund_agent.name,
            ts=timezone.now(), kind="tool_call", tool="orders.lookup")
        old_model("SandboxAgent").objects.filter(pk=made["sandbox"]).update(
            state={"tools": ["b"]})
        ContentType.objects.clear_cache()
        assert {ct.app_label for ct in ContentType.objects.filter(
            model__in=[m._meta.model_name for m in MOVED])} <= {"reconciliation"}
    finally:
        migrate(latest())

    assert schema() == before
    assert Escalation.objects.get(pk=made["escalation"]).decision.rule == "approval_above"
    assert ObservedState.objects.get(pk=made["seen"]).unregistered.name == "math-tutor"
    assert GroupBreach.objects.get(pk=made["breach"]).escalation_id == made["escalation"]
    assert GroupRule.objects.get(pk=made["rule"]).breaches.get().total == 6000
    assert UncountedBatch.objects.get(pk=made["batch"]).events == made["events"]
    assert set(BehaviourEvent.objects.values_list("event_id", flat=True)) == {
        "e-3", "e-0", "written-before"}
    assert SandboxAgent.objects.get(agent=refund_agent).state == {"tools": ["b"]}
    ContentType.objects.clear_cache()
    assert refund_agent.decisions.get().escalation.pk == made["escalation"]
    for model, app in MOVED.items():
        assert ContentType.objects.get_for_model(model).app_label == app
        assert not ContentType.objects.filter(app_label="reconciliation",
                                              model=model._meta.model_name).exists()
    if connection.vendor == "postgresql":  # the events' day partitions were not touched
        with connection.cursor() as cursor:
            assert partitions.is_partitioned(cursor, BehaviourEvent._meta.db_table)
            cursor.execute('SELECT DISTINCT tableoid::regclass::text FROM '
                           '"reconciliation_behaviourevent"')
            assert all(name.startswith("reconciliation_behaviourevent_")
                       for (name,) in cursor.fetchall())
