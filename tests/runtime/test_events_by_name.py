"""The events' by-name index holds only unregistered agents' events (a registered agent's are
read by agent), so ingest writes one index fewer per event; what reads events by name (a
shadow agent's registration) still reads them through it, on every day partition, and the
migration that made it so goes down and up keeping every event."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from reconciliation.actions.retention import make_partitions
from runtime.models import BehaviourEvent
from tests.conftest import postgresql_only
from tests.migrating import latest, migrate

pytestmark = postgresql_only


def read(agent: str) -> dict:
    return {"id": uuid.uuid4().hex, "agent": agent, "kind": "data_access",
            "resource": "orders_db", "record": "o-1",
            "ts": (datetime.now(UTC) - timedelta(minutes=1)).isoformat()}


def by_name_indexes() -> dict[str, tuple[str, bool]]:
    """Per table (the events' table and each partition), its index over (agent_name, ts):
    its definition and whether it is valid."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.relname, pg_get_indexdef(i.indexrelid), i.indisvalid FROM pg_index i "
            "JOIN pg_class t ON t.oid = i.indrelid "
            "WHERE t.relname LIKE 'reconciliation_behaviourevent%%' "
            "AND pg_get_indexdef(i.indexrelid) LIKE '%%(agent_name, ts)%%'")
        return {table: (definition, valid) for table, definition, valid in cursor.fetchall()}


def partitions() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c "
                       "ON c.oid = i.inhrelid "
                       "WHERE i.inhparent = 'reconciliation_behaviourevent'::regclass")
        return {name for (name,) in cursor.fetchall()}


def plan(queryset) -> str:
    """The plan of `queryset` when PostgreSQL may use any index it can (sequential scans
    priced out): a Seq Scan left in it means no index serves the query."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    return queryset.explain()


@pytest.mark.django_db
def test_only_unregistered_agents_events_are_indexed_by_name_on_every_partition(
        agent_client, api_as, people):
    make_partitions(now=timezone.now() + timedelta(days=20))  # days made after the migration
    indexes = by_name_indexes()
    assert set(indexes) == {"reconciliation_behaviourevent", *partitions()}
    for table, (definition, valid) in indexes.items():
        assert definition.endswith("WHERE (agent_id IS NULL)"), (table, definition)
        assert valid, table

    # Shadow agents' events are found by name through it (what registering one reads)...
    owner = api_as(people.alice)
    assert owner.post("/api/v1/events", [read("shadow-bot")],
                      format="json").json()["accepted"] == 1
    assert agent_client.post("/api/v1/events", [read("refund-agent")],
                             format="json").json()["accepted"] == 1
    waiting = BehaviourEvent.objects.filter(agent_name="shadow-bot", agent__isnull=True)
    assert waiting.count() == 1
    shadow = plan(waiting)
    assert "Seq Scan" not in shadow and ("_name_unregistered" in shadow
                                         or "_agent_name_ts_idx" in shadow), shadow
    # ... and a registered agent's by agent.
    own = BehaviourEvent.objects.filter(agent__name="refund-agent")
    assert "Seq Scan" not in plan(BehaviourEvent.objects.filter(agent_id=own.get().agent_id))


@pytest.mark.django_db(transaction=True)
def test_the_migration_goes_down_and_up_keeping_every_event(agent_client, api_as, people):
    owner = api_as(people.alice)
    sent = [read("refund-agent") for _ in range(3)]
    assert agent_client.post("/api/v1/events", sent, format="json").json()["accepted"] == 3
    assert owner.post("/api/v1/events", [read("shadow-bot")],
                      format="json").json()["accepted"] == 1
    try:
        migrate([("runtime", "0003_events_indexed_less")])
        down = by_name_indexes()
        assert set(down) == {"reconciliation_behaviourevent", *partitions()}
        assert all(not d.endswith("IS NULL)") and valid for d, valid in down.values())
    finally:
        migrate(latest())
    up = by_name_indexes()
    assert set(up) == {"reconciliation_behaviourevent", *partitions()}
    assert all(d.endswith("WHERE (agent_id IS NULL)") and valid for d, valid in up.values())
    assert sorted(BehaviourEvent.objects.filter(agent_name="refund-agent").values_list(
        "event_id", flat=True)) == sorted(e["id"] for e in sent)
    assert BehaviourEvent.objects.filter(agent_name="shadow-bot", agent__isnull=True).count() == 1
