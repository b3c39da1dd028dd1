"""Ingest's repeat check reads one plain table of (agent, event id) keys, not the events'
day partitions: a resend is found however many days are kept and whatever time it carries,
without reading a single day of events; the keys go with their events' days under retention;
and a database upgraded from before the keys has a key for every event it stored."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from audit.choices import AuditAction
from audit.models import AuditEntry
from reconciliation.actions.retention import apply_retention, make_partitions
from runtime.actions.behaviour import ingest_events
from runtime.models import BehaviourEvent, EventKey
from tests.conftest import assert_trail_whole, postgresql_only
from tests.migrating import latest, migrate


def event(ts: datetime, event_id: str | None = None, agent: str = "refund-agent") -> dict:
    return {"id": event_id or uuid.uuid4().hex, "agent": agent, "ts": ts.isoformat(),
            "kind": "data_access", "resource": "orders_db", "record": "order-1"}


def post(client, events: list[dict]) -> list[str]:
    response = client.post("/api/v1/events", events, format="json")
    assert response.status_code == 200, response.content
    return [r["status"] for r in response.json()["results"]]


def scans() -> dict[str, int]:
    """Per events partition, the scans this transaction made of it (a test's transaction
    holds the request's)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, seq_scan + coalesce(idx_scan, 0) "
                       "FROM pg_stat_xact_user_tables "
                       "WHERE relname LIKE 'reconciliation_behaviourevent_%%'")
        return dict(cursor.fetchall())


@postgresql_only
@pytest.mark.django_db
def test_a_resend_is_found_without_reading_any_day_of_events(agent_client):
    now = datetime.now(UTC)
    make_partitions(now=timezone.now() - timedelta(days=40))  # forty days of partitions
    make_partitions()
    first = event(now - timedelta(days=12))
    assert post(agent_client, [first]) == ["accepted"]
    before = scans()
    assert len(before) > 40

    # Sent again re-stamped today (a client that stamps on retry), beside a new one.
    assert post(agent_client, [{**first, "ts": now.isoformat()}, event(now)]) == [
        "duplicate", "accepted"]

    # Only today's partition is touched: the new event is inserted into it.
    read = {name: count - before.get(name, 0) for name, count in scans().items()
            if count != before.get(name, 0)}
    assert set(read) <= {f"reconciliation_behaviourevent_p{now:%Y%m%d}"}, \
        f"the repeat check read day partitions of events: {read}"
    assert BehaviourEvent.objects.filter(event_id=first["id"]).count() == 1
    assert set(EventKey.objects.values_list("event_id", flat=True)) == {
        first["id"], *BehaviourEvent.objects.values_list("event_id", flat=True)}


@pytest.mark.django_db
def test_a_key_goes_with_its_events_day_and_the_id_is_free_again(refund_agent, people):
    then = timezone.now() - timedelta(days=100)
    if connection.vendor == "postgresql":
        make_partitions(now=then)
    old, recent = event(then, "old-id"), event(timezone.now() - timedelta(days=1), "new-id")
    ingest_events([old], actor=people.admin, now=then + timedelta(minutes=1))
    ingest_events([recent], actor=people.admin)
    assert set(EventKey.objects.values_list("event_id", flat=True)) == {"old-id", "new-id"}

    apply_retention()

    assert list(EventKey.objects.values_list("event_id", flat=True)) == ["new-id"]
    assert list(BehaviourEvent.objects.values_list("event_id", flat=True)) == ["new-id"]
    (entry,) = AuditEntry.objects.filter(action=AuditAction.RETENTION_ROWS_DELETED,
                                         target="table:runtime_eventkey")
    assert (entry.before["kind"], entry.before["rows"]) == ("events", 1)
    # The id's event is gone, so the id is free: sent now, it is a new event.
    report = ingest_events([event(timezone.now(), "old-id")], actor=people.admin)
    assert report.to_dict()["accepted"] == 1
    assert ingest_events([event(timezone.now(), "new-id")], actor=people.admin
                         ).to_dict()["duplicates"] == 1
    assert_trail_whole()


@pytest.mark.django_db(transaction=True)
def test_an_upgraded_database_has_a_key_for_every_event_it_stored(refund_agent, people):
    migrate([("runtime", "0001_initial")])
    try:
        now = timezone.now()
        with connection.cursor() as cursor:  # events as the release before the keys stored them
            for event_id, days, foreign in (("a", 3, False), ("a", 1, False), ("b", 0, False),
                                            ("theirs", 0, True)):
                cursor.execute(
                    "INSERT INTO reconciliation_behaviourevent (event_id, agent_id, agent_name,"
                    ' ts, kind, tool, resource, record, action, approved_by, decision_id,'
                    ' trace_id, span_id, source, model, operation, error, received_at, sender,'
                    ' "foreign") VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,'
                    " %s, %s, %s, %s, %s, %s, %s)",
                    [event_id, refund_agent.pk, refund_agent.name,
                     now - timedelta(days=days), "tool_call", "lookup", "", "", "", "", "", "",
                     "", "api", "", "", "", now, "", foreign])
    finally:
        migrate(latest())

    assert sorted(EventKey.objects.values_list("event_id", "ts")) == [
        ("a", BehaviourEvent.objects.filter(event_id="a").order_by("ts").first().ts),
        ("b", BehaviourEvent.objects.get(event_id="b").ts)]
    report = ingest_events([event(now, "a"), event(now, "b"), event(now, "theirs")],
                           actor=people.admin).to_dict()
    assert [r["status"] for r in report["results"]] == ["duplicate", "duplicate", "accepted"]
