"""Behaviour events: batched in the background, memory bounded while the control plane is
down, the same batch (same ids) sent again until it is answered, flushed at close and at exit.
The tests against the server need POST /api/v1/events."""

import json
import subprocess
import sys
import threading
import time
from datetime import datetime

import pytest
from agentgov import Client, EventBatcher, EventsResult, Invalid, Unreachable

from config.embedded_redis import free_port
from runtime.models import BehaviourEvent
from tests.clients.conftest import ScriptedTransport
from tests.conftest import eventually


class FakeControlPlane:
    """Stands in for POST /api/v1/events: down (unreachable) until told otherwise."""

    def __init__(self, *, down: bool = False, error: Exception | None = None) -> None:
        self.down = down
        self.error = error
        self.calls: list[list[str]] = []
        self.stored: list[str] = []

    def __call__(self, events: list[dict]) -> EventsResult:
        ids = [e["id"] for e in events]
        self.calls.append(ids)
        if self.error is not None:
            raise self.error
        if self.down:
            raise Unreachable("connection refused")
        fresh = [i for i in ids if i not in self.stored]
        self.stored.extend(fresh)
        return EventsResult(accepted=len(fresh), duplicates=len(ids) - len(fresh), rejected=0,
                            results=[])


def batcher(plane, **options) -> EventBatcher:
    options = {"flush_interval": 0.02, "retry_base": 0.01, "retry_cap": 0.02, **options}
    return EventBatcher(plane, **options)


def test_while_the_control_plane_is_down_memory_is_bounded_and_the_oldest_go_first():
    plane = FakeControlPlane(down=True)
    sender = batcher(plane, max_queue=5, batch_size=2)
    sender.add({"id": "e1"})
    eventually(lambda: plane.calls, timeout=5)  # e1 is the batch in flight
    for n in range(2, 13):
        sender.add({"id": f"e{n}"})
    assert sender.queued == 1 + 5 and sender.dropped == 6
    plane.down = False
    assert sender.flush(timeout=5)
    assert plane.stored == ["e1", "e8", "e9", "e10", "e11", "e12"]
    assert sender.accepted == 6 and sender.queued == 0
    sender.close()


def test_a_batch_is_sent_again_with_the_same_ids_until_it_is_answered():
    plane = FakeControlPlane(down=True)
    sender = batcher(plane, batch_size=10, flush_interval=0.2)
    for n in range(3):
        sender.add({"id": f"e{n}"})
    eventually(lambda: len(plane.calls) >= 3, timeout=5)
    plane.down = False
    assert sender.flush(timeout=5)
    assert all(call == ["e0", "e1", "e2"] for call in plane.calls)
    assert isinstance(sender.last_error, Unreachable) and sender.attempts == len(plane.calls)
    sender.close()


def test_close_sends_what_is_queued_without_waiting_for_the_interval():
    plane = FakeControlPlane()
    sender = batcher(plane, flush_interval=60, batch_size=100)
    for n in range(5):
        sender.add({"id": f"e{n}"})
    started = time.monotonic()
    sender.close(timeout=5)
    assert plane.stored == [f"e{n}" for n in range(5)]
    assert time.monotonic() - started < 2


def test_close_gives_up_in_bounded_time_when_the_control_plane_stays_down():
    plane = FakeControlPlane(down=True)
    sender = batcher(plane)
    sender.add({"id": "e1"})
    sender.add({"id": "e2"})
    started = time.monotonic()
    sender.close(timeout=0.3)
    assert time.monotonic() - started < 3
    eventually(lambda: sender.dropped == 2, timeout=5)
    sender.add({"id": "late"})  # after close: counted, not sent, no exception
    assert sender.dropped == 3


def test_a_refused_batch_is_not_retried():
    plane = FakeControlPlane(error=Invalid(400, "malformed", "not a batch"))
    sender = batcher(plane)
    sender.add({"id": "e1"})
    assert sender.flush(timeout=5)
    assert plane.calls == [["e1"]] and sender.failed == 1
    sender.close()


# --- against the control plane ------------------------------------------------------------------


def stored(ids) -> int:
    return BehaviourEvent.objects.filter(event_id__in=list(ids)).count()


def test_events_reach_the_control_plane_in_batches(agent_client):
    ids = [agent_client.tool_call("orders.lookup"),
           agent_client.data_access("orders_db", record="order-7"),
           agent_client.action("payments.refund", amount=120)]
    assert agent_client.flush_events(timeout=10)
    assert agent_client.events.accepted == 3 and stored(ids) == 3
    refund = BehaviourEvent.objects.get(event_id=ids[2])
    assert (refund.agent_name, refund.kind, refund.amount) == ("refund-agent", "action", 120)


def test_events_wait_for_an_unreachable_control_plane_then_count_once(server, agent_key):
    client = Client(f"http://127.0.0.1:{free_port()}", agent_key, agent="refund-agent",
                    event_flush_interval=0.02, event_retry_base=0.02, event_retry_cap=0.1)
    ids = [client.data_access("customers_db", record=f"c-{n}") for n in range(3)]
    assert not client.flush_events(timeout=0.5)
    assert isinstance(client.events.last_error, Unreachable) and client.events.attempts >= 1
    client.base_url = server  # the control plane is back (or another replica answers)
    assert client.flush_events(timeout=10)
    assert client.events.accepted == 3 and stored(ids) == 3
    client.close()


def test_a_lost_answer_is_sent_again_with_the_same_ids_and_counted_once(server, agent_key):
    transport = ScriptedTransport("lose")
    client = Client(server, agent_key, agent="refund-agent", transport=transport,
                    event_flush_interval=0.02, event_retry_base=0.02, event_retry_cap=0.1)
    ids = [client.tool_call("orders.lookup") for _ in range(4)]
    assert client.flush_events(timeout=10)
    assert transport.statuses == ["lost", 200]
    first, second = (json.loads(r.content) for r in transport.requests)
    assert [e["id"] for e in first] == [e["id"] for e in second] == ids
    assert (client.events.accepted, client.events.duplicates) == (0, 4)
    assert stored(ids) == 4
    client.close()


def test_events_are_flushed_when_the_process_exits(server, agent_key):
    script = (
        "import sys\n"
        "from agentgov import Client\n"
        "client = Client(sys.argv[1], sys.argv[2], agent='refund-agent',\n"
        "                event_flush_interval=3600)\n"
        "print(client.tool_call('orders.lookup'))\n"
    )  # no close(): the interpreter's exit must send it
    done = subprocess.run([sys.executable, "-c", script, server, agent_key],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert stored([done.stdout.strip()]) == 1


def test_recording_is_cheap_and_safe_from_many_threads(agent_client):
    def work(n: int) -> None:
        for i in range(50):
            agent_client.tool_call("orders.lookup", trace_id=f"{n:02d}{i:030d}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert agent_client.flush_events(timeout=60)
    assert agent_client.events.accepted == 200
    assert BehaviourEvent.objects.filter(agent_name="refund-agent").count() == 200


def test_obviously_wrong_events_fail_at_once_in_the_caller(agent_client):
    with pytest.raises(ValueError, match="kind must be one of"):
        agent_client.record_event("teleport")
    with pytest.raises(ValueError, match="time zone"):
        agent_client.record_event("action", action="payments.refund", ts=datetime(2026, 1, 1))
    assert agent_client.events.queued == 0
