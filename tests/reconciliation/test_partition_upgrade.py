"""A database made before partitioning upgrades: its events, observations, runs and alerts
move into day partitions with their ids, a correction still finds its run, new rows get ids
after the old ones, and downgrading gives the plain tables back with every row."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from reconciliation import partitions
from reconciliation.models import AlertEvent, Correction, ObservedState, ReconcileRun
from runtime.models import BehaviourEvent
from tests.conftest import postgresql_only
from tests.migrating import latest, migrate

# Day partitions (and `tableoid`) are PostgreSQL's; on SQLite the tables stay plain.
pytestmark = postgresql_only

BEFORE = [("reconciliation", "0020_group_rule_effect_block")]
TABLES = ("reconciliation_behaviourevent", "reconciliation_observedstate",
          "reconciliation_reconcilerun", "reconciliation_alertevent")


def where(table: str, pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT tableoid::regclass::text FROM "{table}" WHERE id = %s', [pk])
        return cursor.fetchone()[0]


def write_as_the_old_code_did(apps, agent_id: int) -> dict[str, list[int]]:
    """Rows of every kind over the last 60 days, in the plain tables."""
    now = timezone.now()
    made: dict[str, list[int]] = {"events": [], "observations": [], "runs": [], "alerts": []}
    run_model = apps.get_model("reconciliation", "ReconcileRun")
    for days in (60, 10, 0):
        at = now - timedelta(days=days)
        made["events"].append(apps.get_model("reconciliation", "BehaviourEvent").objects.create(
            event_id=f"e-{days}", agent_id=agent_id, agent_name="refund-agent", ts=at,
            kind="tool_call").pk)
        made["observations"].append(apps.get_model("reconciliation", "ObservedState").objects
                                    .create(agent_id=agent_id, state={"days": days},
                                            state_sha256=str(days), source="push",
                                            reported_by="t", observed_at=at).pk)
        made["runs"].append(run_model.objects.create(agent_id=agent_id, trigger="resync",
                                                     generation=1, started_at=at,
                                                     result="converged").pk)
        made["alerts"].append(apps.get_model("reconciliation", "AlertEvent").objects.create(
            at=at, event="drift.detected").pk)
    finding = apps.get_model("reconciliation", "Finding").objects.create(
        agent_id=agent_id, fingerprint="f", kind="tool_added", pointer="/tools/x",
        severity="high", area="tools", generation=1)
    apps.get_model("reconciliation", "Correction").objects.create(
        finding=finding, agent_id=agent_id, run_id=made["runs"][0], idempotency_key="k",
        operation={})
    return made


def is_partitioned(table: str) -> bool:
    with connection.cursor() as cursor:
        return partitions.is_partitioned(cursor, table)


@pytest.mark.django_db(transaction=True)
def test_an_old_database_upgrades_into_day_partitions_keeping_every_row(refund_agent):
    migrate(BEFORE)
    try:
        assert not any(is_partitioned(t) for t in TABLES)
        old_apps = MigrationExecutor(connection).loader.project_state(BEFORE).apps
        made = write_as_the_old_code_did(old_apps, refund_agent.pk)
    finally:
        migrate(latest())

    assert all(is_partitioned(t) for t in TABLES)
    sixty_days_ago = (timezone.now() - timedelta(days=60)).date()
    for model, kind in ((BehaviourEvent, "events"), (ObservedState, "observations"),
                        (ReconcileRun, "runs"), (AlertEvent, "alerts")):
        assert set(made[kind]) <= set(model.objects.values_list("pk", flat=True))
        # Even a day older than any partition made ahead got its own.
        assert where(model._meta.db_table, made[kind][0]) == partitions.partition_name(
            model._meta.db_table, sixty_days_ago)
    assert Correction.objects.get(idempotency_key="k").run.pk == made["runs"][0]
    newer = AlertEvent.objects.create(event="drift.detected")
    assert newer.pk > max(AlertEvent.objects.exclude(pk=newer.pk).values_list("pk", flat=True))
    latest_observed = ObservedState.objects.filter(agent=refund_agent).order_by(
        "-observed_at").first()
    assert latest_observed.pk == made["observations"][-1]

    migrate(BEFORE)  # and back down: plain tables, the same rows
    try:
        assert not any(is_partitioned(t) for t in TABLES)
        old_apps = MigrationExecutor(connection).loader.project_state(BEFORE).apps
        events = old_apps.get_model("reconciliation", "BehaviourEvent").objects
        assert set(made["events"]) <= set(events.values_list("pk", flat=True))
    finally:
        migrate(latest())
    assert all(is_partitioned(t) for t in TABLES)
