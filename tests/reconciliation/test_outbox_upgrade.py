"""A database from when each event carried its own `counted` flag upgrades to the outbox of
batches: events still uncounted are carried into outbox rows (and drained by recount_events),
counted ones are not; downgrading gives the flag back, false only for what is still waiting."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from runtime.actions.behaviour import recount_events
from runtime.models import UncountedBatch
from tests.migrating import latest, migrate

BEFORE = [("reconciliation", "0024_merge_0023_finding_recent_index_0023_fleet_snapshot")]


def old_events():
    return MigrationExecutor(connection).loader.project_state(BEFORE).apps.get_model(
        "reconciliation", "BehaviourEvent").objects


@pytest.mark.django_db(transaction=True)
def test_uncounted_events_move_into_the_outbox_and_back(refund_agent):
    now = timezone.now()
    migrate(BEFORE)
    try:
        made = {name: old_events().create(
            event_id=name, agent_id=refund_agent.pk, agent_name="refund-agent", ts=ts,
            kind="tool_call", tool="orders.lookup", received_at=now, counted=counted).pk
            for name, ts, counted in (("waiting-old", now - timedelta(days=2), False),
                                      ("waiting-new", now, False),
                                      ("counted", now, True))}
    finally:
        migrate(latest())

    (held,) = UncountedBatch.objects.all()
    assert sorted(held.events) == sorted([made["waiting-old"], made["waiting-new"]])

    migrate(BEFORE)  # down with the batch still waiting: its events are uncounted again
    try:
        assert set(old_events().filter(counted=False).values_list("event_id", flat=True)) == {
            "waiting-old", "waiting-new"}
    finally:
        migrate(latest())

    (held,) = UncountedBatch.objects.all()
    assert recount_events() == 2
    assert not UncountedBatch.objects.exists()
