"""A Redis that restarts from an older snapshot (what a crash does to a server that saves
snapshots: it comes back with the windows as of its last save) holds windows without the
events since, and the epoch and fill markers of that time, which vouched for them: the
product counted from there and let through what the missing events had used up. The windows'
epoch belongs to one server run now, so whatever restarted is filled again from the stored
events before anything is counted or decided.

A real redis-server saving to a folder of the test's own, stopped without saving and started
again from what it saved."""

import uuid
from datetime import UTC, datetime

from runtime import actions as runtime_actions
from runtime.actions.group_rules import create_group_rule
from tests.conftest import approved_agent, decision_of
from tests.snapshot_redis import SnapshotRedis

CAPPED = {"data": [{"resource": "customers_db", "access": "read"}],
          "limits": [{"resource": "customers_db", "max_calls": 5, "per": "1h"}],
          "enforcement": {"default": "correct", "behaviour": "log"}}


def read(agent: str, record: str | None = None) -> dict:
    return {"id": uuid.uuid4().hex, "agent": agent, "kind": "data_access",
            "ts": datetime.now(UTC).isoformat(), "resource": "customers_db",
            "record": record or uuid.uuid4().hex}


def ingest(people, events, capture) -> dict:
    with capture(execute=True):
        return runtime_actions.ingest_events(events, actor=people.admin).to_dict()


def window(server: SnapshotRedis, agent) -> int:
    return server.client().zcard(f"bw:{agent.pk}:customers_db:calls:3600")


def test_a_batch_after_a_restart_from_an_older_snapshot_counts_every_stored_event(
        people, snapshot_redis, django_capture_on_commit_callbacks):
    agent = approved_agent(people, "capped", **CAPPED)
    ingest(people, [read("capped") for _ in range(2)], django_capture_on_commit_callbacks)
    snapshot_redis.save()
    ingest(people, [read("capped") for _ in range(2)], django_capture_on_commit_callbacks)
    snapshot_redis.crash_and_restart()
    assert window(snapshot_redis, agent) == 2  # as of the snapshot: two reads missing
    ingest(people, [read("capped")], django_capture_on_commit_callbacks)
    assert window(snapshot_redis, agent) == 5  # every stored read and the new one


def test_a_decision_after_a_restart_from_an_older_snapshot_sees_the_window_full(
        people, snapshot_redis, django_capture_on_commit_callbacks):
    """The window of five reads an hour is full in what is stored; the snapshot holds two of
    them. Deciding on a sixth must deny, not allow on the snapshot's count."""
    agent = approved_agent(people, "capped", **CAPPED)
    ingest(people, [read("capped") for _ in range(2)], django_capture_on_commit_callbacks)
    snapshot_redis.save()
    ingest(people, [read("capped") for _ in range(3)], django_capture_on_commit_callbacks)
    snapshot_redis.crash_and_restart()
    answer = decision_of(people, agent, {"resource": "customers_db", "record": "c-6"})
    assert answer["outcome"] == "deny" and "the window is full" in answer["rule"], answer


def test_group_windows_after_a_restart_from_an_older_snapshot_hold_every_stored_event(
        people, snapshot_redis, django_capture_on_commit_callbacks):
    approved_agent(people, "grouped", **CAPPED)
    rule = create_group_rule(actor=people.dana, name="one-customer", measure="events",
                             limit=1000, per="1h", per_record=True,
                             match={"kind": "data_access", "resource": "customers_db"})
    ingest(people, [read("grouped", "c-1")], django_capture_on_commit_callbacks)
    snapshot_redis.save()
    ingest(people, [read("grouped", "c-1") for _ in range(2)],
           django_capture_on_commit_callbacks)
    snapshot_redis.crash_and_restart()
    ingest(people, [read("grouped", "c-1")], django_capture_on_commit_callbacks)
    client = snapshot_redis.client()
    (group_window,) = [key for key in client.keys(f"gw:{rule.id}:*")
                       if not key.endswith((b":sum", b":agents")) and b"filled" not in key]
    assert client.zcard(group_window) == 4  # the three stored reads and the new one
