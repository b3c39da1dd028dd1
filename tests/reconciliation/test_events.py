"""POST /api/v1/events: batches in, each event accepted, duplicate or rejected on its own;
replays never double-count; unregistered agents are kept and can be adopted."""

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from audit.models import AuditEntry
from registry import actions as registry_actions
from registry.models import Agent
from runtime.models import BehaviourEvent, UnregisteredAgent
from tests.conftest import refund_manifest

pytestmark = pytest.mark.django_db


def now_iso(offset_seconds: int = 0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=offset_seconds)).isoformat()


def event(agent="refund-agent", **fields):
    return {"id": uuid.uuid4().hex, "agent": agent, "ts": now_iso(), "kind": "data_access",
            "resource": "orders_db", "record": "order-1", **fields}



def post(client, events, ndjson=False):
    if ndjson:
        body = "\n".join(json.dumps(e) for e in events)
        return client.generic("POST", "/api/v1/events", body,
                              content_type="application/x-ndjson")
    return client.post("/api/v1/events", events, format="json")


def test_a_batch_is_stored_and_a_replay_is_not_counted_twice(agent_client, redis_client):
    batch = [event(record=f"order-{i}") for i in range(5)]
    first = post(agent_client, batch)
    assert first.status_code == 200
    assert first.json()["accepted"] == 5 and first.json()["duplicates"] == 0
    replay = post(agent_client, batch, ndjson=True)
    assert replay.json() == {"accepted": 0, "duplicates": 5, "rejected": 0,
                             "results": [{"id": e["id"], "status": "duplicate"} for e in batch]}
    assert BehaviourEvent.objects.count() == 5


def test_an_id_sent_again_on_another_day_is_a_repeat_whatever_its_ts(agent_client):
    """A resend stamped with another time (a
    client that re-stamps on retry) lands on another day, and is still the same event."""
    first = event(ts=(datetime.now(UTC) - timedelta(days=12)).isoformat())
    assert post(agent_client, [first]).json()["accepted"] == 1
    for ts in (first["ts"], now_iso(), (datetime.now(UTC) - timedelta(days=29)).isoformat()):
        body = post(agent_client, [{**first, "ts": ts}, event()]).json()
        assert [r["status"] for r in body["results"]] == ["duplicate", "accepted"]
    assert BehaviourEvent.objects.filter(event_id=first["id"]).count() == 1
    assert BehaviourEvent.objects.count() == 4


def test_each_bad_event_is_rejected_with_its_reason_and_the_rest_accepted(agent_client):
    good = event()
    batch = [good, event(kind="teleport"), event(ts="2026-01-01T00:00:00"),
             event(ts=now_iso(3600)), {"id": "x"}, event(amount="lots", kind="action",
                                                         action="payments.refund"),
             event(agent="other-agent"), "not an object"]
    body = post(agent_client, batch).json()
    assert body["accepted"] == 1 and body["rejected"] == 7
    reasons = [r.get("reason", "") for r in body["results"]]
    assert reasons[1].startswith("kind must be one of")
    assert reasons[2] == "ts has no zone"
    assert reasons[3] == "ts is in the future"
    assert reasons[4].startswith("agent must be")
    assert reasons[5] == "amount cannot be read: 'lots' is not a plain decimal number"
    assert reasons[6] == "an agent token sends its own events only"
    assert reasons[7] == "expected a JSON object"
    assert list(BehaviourEvent.objects.values_list("event_id", flat=True)) == [good["id"]]


def test_an_agent_token_cannot_send_another_agents_events(agent_client):
    response = post(agent_client, [event(agent="other-agent")])
    assert response.status_code == 403
    assert not BehaviourEvent.objects.exists()


@pytest.mark.parametrize("body, status", [
    ("[{", 400), ('{"id": 1}', 400), ("[" + ",".join(["{}"] * 5001) + "]", 413)])
def test_malformed_and_oversize_batches(agent_client, body, status):
    response = agent_client.generic("POST", "/api/v1/events", body,
                                    content_type="application/json")
    assert response.status_code == status
    assert response.json()["error"]["code"] == {400: "malformed", 413: "too_large"}[status]


def test_unregistered_agents_are_kept_assigned_and_adopted_on_registration(people, api_as):
    platform = api_as(people.admin)
    body = post(platform, [event(agent="mystery-bot"), event(agent="mystery-bot")]).json()
    assert body["accepted"] == 2
    dana = api_as(people.dana)
    (shadow,) = dana.get("/api/v1/unregistered").json()
    assert (shadow["name"], shadow["events"], shadow["assigned_owner"]) == (
        "mystery-bot", 2, None)
    assert dana.post("/api/v1/unregistered/mystery-bot/assign", {"owner": "bob"},
                     format="json").status_code == 422  # bob is not an owner
    assigned = dana.post("/api/v1/unregistered/mystery-bot/assign", {"owner": "alice"},
                         format="json")
    assert assigned.json()["assigned_owner"] == "alice"
    manifest = refund_manifest()
    object.__setattr__(manifest, "name", "mystery-bot")
    registry_actions.apply_manifests([manifest], actor=people.alice, source="yaml")
    agent = Agent.objects.get(name="mystery-bot")
    assert BehaviourEvent.objects.filter(agent=agent).count() == 2
    assert UnregisteredAgent.objects.get(name="mystery-bot").registered
    assert dana.get("/api/v1/unregistered").json() == []
    assert AuditEntry.objects.filter(action="unregistered.adopted").get().after == {
        "events": 2, "foreign_events": 0, "observations": 0, "foreign_observations": 0}


def test_a_platform_reporting_an_unknown_agent_is_kept_as_a_shadow_agent(people, api_as):
    platform = api_as(people.admin)
    response = platform.put("/api/v1/agents/ghost-agent/observed-state",
                            {"tools": ["crm.search"], "running": True}, format="json")
    assert response.status_code == 202 and response.json()["registered"] is False
    shadow = UnregisteredAgent.objects.get(name="ghost-agent")
    assert shadow.last_observation == {"tools": ["crm.search"], "running": True}
    assert api_as(people.bob).put("/api/v1/agents/ghost-agent/observed-state", {},
                                  format="json").status_code == 404


def test_a_shadow_agents_observations_keep_their_history_and_become_its_own(people, api_as):
    from reconciliation.models import ObservedState

    platform = api_as(people.admin)
    first = {"tools": ["crm.search"], "running": True}
    changed = {"tools": ["crm.search", "orders.lookup"], "running": True}
    for state in (first, first, changed):
        assert platform.put("/api/v1/agents/ghost-agent/observed-state", state,
                            format="json").status_code == 202
    shadow = UnregisteredAgent.objects.get(name="ghost-agent")
    history = ObservedState.objects.filter(unregistered=shadow).order_by("observed_at")
    assert [row.state for row in history] == [first, changed]  # the heartbeat added no row
    assert shadow.last_observation == changed
    assert list(AuditEntry.objects.filter(action="observation.recorded").values_list(
        "target", flat=True)) == ["unregistered:ghost-agent"] * 2

    api_as(people.dana).post("/api/v1/unregistered/ghost-agent/assign", {"owner": "alice"},
                             format="json")
    manifest = refund_manifest()
    object.__setattr__(manifest, "name", "ghost-agent")
    registry_actions.apply_manifests([manifest], actor=people.alice, source="yaml")
    agent = Agent.objects.get(name="ghost-agent")
    assert [row.state for row in agent.observations.order_by("observed_at")] == [first, changed]
    assert AuditEntry.objects.get(action="unregistered.adopted").after == {
        "events": 0, "foreign_events": 0, "observations": 2, "foreign_observations": 0}


def test_events_from_before_registration_count_in_the_windows_from_approval_on(
        people, api_as, redis_client, django_capture_on_commit_callbacks):
    import django_rq
    from rq import SimpleWorker

    from reconciliation.models import Finding

    def read(minutes_ago: int) -> dict:
        return event(agent="mystery-bot", resource="customers_db", record="c-1",
                     ts=(datetime.now(UTC) - timedelta(minutes=minutes_ago)).isoformat())

    def ingest_worker() -> None:
        queue = django_rq.get_queue("ingest")
        SimpleWorker([queue], connection=queue.connection).work(burst=True)

    platform = api_as(people.admin)
    with django_capture_on_commit_callbacks(execute=True):
        post(platform, [read(40), read(39), read(38)])  # nobody governs mystery-bot yet
    api_as(people.dana).post("/api/v1/unregistered/mystery-bot/assign", {"owner": "alice"},
                             format="json")
    manifest = refund_manifest(
        data=[{"resource": "customers_db", "access": "read"}],
        limits=[{"resource": "customers_db", "max_same_record": 3, "per": "1h"}],
        enforcement={"default": "correct", "behaviour": "log"})
    object.__setattr__(manifest, "name", "mystery-bot")
    (outcome,) = registry_actions.apply_manifests([manifest], actor=people.alice,
                                                  source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    agent = Agent.objects.get(name="mystery-bot")
    ingest_worker()
    assert not Finding.objects.filter(agent=agent).exists()  # the adopted reads are not judged

    with django_capture_on_commit_callbacks(execute=True):
        post(platform, [read(10)])  # the fourth read of c-1 within the hour
    ingest_worker()
    (finding,) = Finding.objects.filter(agent=agent)
    assert (finding.kind, finding.expected, finding.actual, finding.status) == (
        "same_record_exceeded", 3, 4, "logged")
    assert redis_client.zcard(f"bw:{agent.pk}:customers_db:record:c-1:3600") == 4


def test_a_validated_event_is_the_frozen_event_its_fields_make():
    import dataclasses

    from runtime.events import Event, validate_event

    now = datetime.now(UTC)
    raw = {"id": "e-1", "agent": "Refund Agent", "ts": now.isoformat(), "kind": "action",
           "action": "payments.refund", "amount": 700, "tool": "payments.refund",
           "input_tokens": 10, "attributes": {"k": "v"}}
    event = validate_event(raw, now)
    assert event == Event(id="e-1", agent="refund-agent", ts=now, kind="action",
                          action="payments.refund", amount=700.0, tool="payments.refund",
                          input_tokens=10, attributes={"k": "v"}, label="Refund Agent")
    assert event.record == "" and event.cost is None  # the defaults, as Event() gives them
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.amount = 1
