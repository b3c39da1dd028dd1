"""WS /ws/alerts: signed-in people receive alerts sent after commit, through Redis."""

import contextlib
import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import connection, transaction
from django.test import Client
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync import client as ws_client

from config.asgi import application
from reconciliation import alerts
from reconciliation.consumers import AlertsConsumer
from tests.conftest import assert_trail_whole, eventually, start_daphne, stop_daphne


def communicator(user) -> WebsocketCommunicator:
    app = AlertsConsumer.as_asgi()
    comm = WebsocketCommunicator(app, "/ws/alerts")
    comm.scope["user"] = user
    return comm


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_anonymous_connections_are_refused():
    comm = communicator(AnonymousUser())
    connected, code = await comm.connect(timeout=30)
    assert connected is False and code == 4401


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_cross_origin_connections_are_refused():
    comm = WebsocketCommunicator(application, "/ws/alerts",
                                 headers=[(b"origin", b"http://evil.example")])
    connected, _ = await comm.connect(timeout=30)
    assert connected is False


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_an_alert_broadcast_after_commit_reaches_a_signed_in_reviewer(people):
    comm = communicator(people.dana)
    connected, _ = await comm.connect(timeout=30)
    assert connected

    def commit_then_roll_back() -> None:
        try:
            send_both()
        finally:
            connection.close()  # this executor thread's connection would outlive the test

    def send_both() -> None:
        with transaction.atomic():
            alerts.broadcast("drift.detected", {"agent": "refund-agent", "severity": "high"})
        try:
            with transaction.atomic():
                alerts.broadcast("drift.detected", {"agent": "rolled-back"})
                raise RuntimeError("change failed")
        except RuntimeError:
            pass

    await sync_to_async(commit_then_roll_back)()
    message = await comm.receive_json_from(timeout=30)
    assert message["event"] == "drift.detected"
    assert message["agent"] == "refund-agent" and message["severity"] == "high"
    assert await comm.receive_nothing(timeout=0.5)  # the rolled-back alert never went out
    await comm.disconnect()


def publish(*alerts_to_send) -> None:
    try:
        with transaction.atomic():
            for event, payload in alerts_to_send:
                alerts.broadcast(event, payload)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_reconnecting_browser_catches_up_on_what_it_missed(people):
    await sync_to_async(publish)(("drift.detected", {"agent": "a1", "severity": "high"}))
    first = communicator(people.dana)
    await first.connect(timeout=30)
    await sync_to_async(publish)(("drift.detected", {"agent": "a2", "severity": "low"}))
    seen = await first.receive_json_from(timeout=30)
    await first.disconnect()
    # While disconnected, two more alerts happen.
    await sync_to_async(publish)(("drift.corrected", {"agent": "a2", "severity": "low"}),
                                 ("escalation.opened", {"agent": "a3", "severity": "high"}))
    again = WebsocketCommunicator(AlertsConsumer.as_asgi(), f"/ws/alerts?since={seen['id']}")
    again.scope["user"] = people.dana
    again.scope["query_string"] = f"since={seen['id']}".encode()
    await again.connect(timeout=30)
    caught_up = [await again.receive_json_from(timeout=30) for _ in range(4)]
    # First the recent ones up to the last seen, re-read in case one committed late (the
    # browser drops the ids it has), then what was missed.
    assert [m["agent"] for m in caught_up[:2]] == ["a1", "a2"] and caught_up[1]["id"] == seen["id"]
    assert [(m["event"], m["agent"], m["replayed"]) for m in caught_up[2:]] == [
        ("drift.corrected", "a2", True), ("escalation.opened", "a3", True)]
    assert await again.receive_nothing(timeout=0.3)
    await again.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_subscriptions_filter_by_severity_and_agent(people):
    comm = WebsocketCommunicator(AlertsConsumer.as_asgi(), "/ws/alerts")
    comm.scope["user"] = people.bob
    comm.scope["query_string"] = b"scope=agent&agent=refund-agent&min_severity=high"
    await comm.connect(timeout=30)
    await sync_to_async(publish)(
        ("drift.detected", {"agent": "refund-agent", "severity": "low"}),
        ("drift.detected", {"agent": "other-agent", "severity": "high"}),
        ("drift.detected", {"agent": "refund-agent", "severity": "high"}))
    message = await comm.receive_json_from(timeout=30)
    assert (message["agent"], message["severity"]) == ("refund-agent", "high")
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_alerts_sent_while_the_channel_layer_is_down_are_caught_up(people, settings):
    from channels.layers import channel_layers

    from config import embedded_redis
    from reconciliation.models import AlertEvent

    working = settings.CHANNEL_LAYERS
    settings.CHANNEL_LAYERS = {"default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [f"redis://127.0.0.1:{embedded_redis.free_port()}/0"]}}}
    channel_layers.backends.clear()
    try:
        # The change commits and its alert row is kept, though nobody could be told live.
        await sync_to_async(publish)(("drift.detected", {"agent": "a9", "severity": "high"}))
    finally:
        settings.CHANNEL_LAYERS = working
        channel_layers.backends.clear()
    missed = await sync_to_async(lambda: AlertEvent.objects.get(agent_name="a9").pk)()
    comm = WebsocketCommunicator(AlertsConsumer.as_asgi(), "/ws/alerts")
    comm.scope["user"] = people.dana
    comm.scope["query_string"] = f"since={missed - 1}".encode()
    await comm.connect(timeout=30)
    message = await comm.receive_json_from(timeout=30)
    assert (message["id"], message["agent"], message["replayed"]) == (missed, "a9", True)
    await comm.disconnect()
    await sync_to_async(assert_trail_whole)()


def connect_since(user, since: int) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(AlertsConsumer.as_asgi(), f"/ws/alerts?since={since}")
    comm.scope["user"] = user
    comm.scope["query_string"] = f"since={since}".encode()
    return comm


def make_alerts(count: int, **fields) -> list[int]:
    """`count` kept alerts, as broadcast writes them (bulk: the catch-up cap is 500)."""
    from django.utils import timezone

    from reconciliation.models import AlertEvent

    try:
        now = timezone.now()
        rows = AlertEvent.objects.bulk_create(
            [AlertEvent(event="drift.detected", agent_name=f"agent-{i}", severity="high",
                        at=now, payload={}, **fields) for i in range(count)])
        return sorted(AlertEvent.objects.values_list("pk", flat=True))[-len(rows):]
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
@pytest.mark.parametrize("viewer, link", [("dana", "/audit/?since="), ("bob", "/findings/")])
async def test_a_catch_up_over_the_cap_says_how_many_it_left_out_and_where_to_read_them(
        people, viewer, link):
    from reconciliation.consumers import CATCH_UP_LIMIT

    ids = await sync_to_async(make_alerts)(CATCH_UP_LIMIT + 12)
    comm = connect_since(getattr(people, viewer), ids[0])  # 511 missed
    await comm.connect(timeout=30)
    notice = await comm.receive_json_from(timeout=30)
    assert notice["event"] == "catchup.truncated" and notice["missed"] == 11
    assert notice["link"].startswith(link) and notice["replayed"] is True
    replayed = [await comm.receive_json_from(timeout=30) for _ in range(CATCH_UP_LIMIT)]
    assert [m["id"] for m in replayed] == ids[-CATCH_UP_LIMIT:]  # the newest, oldest first
    assert notice["before_id"] == replayed[0]["id"]
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_an_alert_committed_late_with_a_lower_id_is_still_caught_up(people):
    from datetime import timedelta

    from django.utils import timezone

    from reconciliation.models import AlertEvent

    def history() -> tuple[int, int, int]:
        try:
            now = timezone.now()
            old = AlertEvent.objects.create(event="drift.detected", agent_name="old",
                                            at=now - timedelta(minutes=10))
            # A long transaction took id old+5 at insert; meanwhile old+10 committed and was
            # delivered: the browser saw old+10 and disconnected.
            seen = AlertEvent.objects.create(pk=old.pk + 10, event="drift.corrected",
                                             agent_name="seen", at=now)
            # Now the long transaction commits.
            late = AlertEvent.objects.create(pk=old.pk + 5, event="escalation.opened",
                                             agent_name="late", at=now - timedelta(seconds=2))
            return old.pk, late.pk, seen.pk
        finally:
            connection.close()

    old, late, seen = await sync_to_async(history)()
    comm = connect_since(people.dana, seen)
    await comm.connect(timeout=30)
    caught_up = [await comm.receive_json_from(timeout=30) for _ in range(2)]
    # The late one, and the one already seen (re-read around it: the browser drops it).
    assert [(m["id"], m["agent"]) for m in caught_up] == [(late, "late"), (seen, "seen")]
    assert await comm.receive_nothing(timeout=0.3)  # nothing from long before
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_an_alert_both_caught_up_and_sent_live_reaches_the_browser_once(people):
    from reconciliation.models import AlertEvent

    await sync_to_async(publish)(("drift.detected", {"agent": "a1", "severity": "high"}))
    first = await sync_to_async(lambda: AlertEvent.objects.get(agent_name="a1").pk)()
    # Committed while the browser reconnects: read by catch-up, and its live send (after
    # commit) reaches the new connection too.
    await sync_to_async(publish)(("drift.corrected", {"agent": "a2", "severity": "high"}))
    both = await sync_to_async(lambda: AlertEvent.objects.get(agent_name="a2"))()
    comm = connect_since(people.dana, first)
    await comm.connect(timeout=30)
    replayed = [await comm.receive_json_from(timeout=30) for _ in range(2)]
    assert [m["id"] for m in replayed] == [first, both.pk]  # first: re-read, as above
    await sync_to_async(alerts.send_now)(both.to_message())
    await sync_to_async(publish)(("escalation.opened", {"agent": "a3", "severity": "high"}))
    live = await comm.receive_json_from(timeout=30)
    assert live["agent"] == "a3" and "replayed" not in live
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


# --- as an attacker would, against a real daphne server ---------------------------------------

CAP = 3


@pytest.fixture
def daphne_capped(transactional_db, redis_client):
    """A daphne server allowing each person CAP live alert connections."""
    server = start_daphne(WS_MAX_CONNECTIONS_PER_USER=str(CAP))
    yield server
    stop_daphne(server)


def open_alerts(server, user, query: str = "since=0"):
    """A websocket to /ws/alerts as a signed-in `user`, from the product's own origin."""
    browser = Client()
    browser.force_login(user)
    session = browser.cookies[settings.SESSION_COOKIE_NAME].value
    origin = server.url
    return ws_client.connect(f"{origin.replace('http', 'ws', 1)}/ws/alerts?{query}",
                             origin=origin, proxy=None, open_timeout=10,
                             additional_headers={
                                 "Cookie": f"{settings.SESSION_COOKIE_NAME}={session}"})


def group_size(redis_client) -> int:
    return redis_client.zcard(f"{settings.CHANNEL_LAYERS['default']['CONFIG']['prefix']}"
                              ":group:alerts")


def places_held(redis_client, user) -> int:
    return redis_client.zcard(f"ws:live:{user.pk}")


ATTACKS = ["since=%C2%B2", "since=99999999999999999999", "since=-1", "scope=everyone",
           "min_severity=%00", "since=0&scope=agent&agent=refund%00agent", "malformed frame",
           "binary frame"]


def test_bad_input_never_leaves_a_member_in_the_alerts_group(
        people, daphne_capped, redis_client):
    def crash_once(attack: str) -> None:
        if attack.endswith("frame"):
            with open_alerts(daphne_capped, people.dana) as socket:
                socket.send(b"\x00\xff" if attack == "binary frame" else "{'not': json")
                with pytest.raises(ConnectionClosed) as closed:
                    socket.recv(timeout=10)
            assert closed.value.rcvd.code == (4415 if attack == "binary frame" else 4400)
        else:
            with pytest.raises(InvalidStatus) as refused:
                open_alerts(daphne_capped, people.dana, attack)
            assert refused.value.response.status_code == 403

    # More than the cap of each, one after another: each one's place under the cap is freed.
    for attack in ATTACKS:
        for _ in range(CAP + 2):
            crash_once(attack)
            eventually(lambda: group_size(redis_client) == 0
                       and places_held(redis_client, people.dana) == 0, timeout=15,
                       message=f"after {attack!r}, a connection stayed in the alerts group "
                               "or kept its place under the cap")

    # The server still serves: a good connection joins, and broadcasts reach it.
    with open_alerts(daphne_capped, people.dana) as socket:
        eventually(lambda: group_size(redis_client) == 1, timeout=15)
        publish(("drift.detected", {"agent": "refund-agent", "severity": "high"}))
        assert json.loads(socket.recv(timeout=10))["agent"] == "refund-agent"
    eventually(lambda: group_size(redis_client) == 0, timeout=15)


def test_one_person_holds_a_bounded_number_of_live_connections(
        people, daphne_capped, redis_client):
    with contextlib.ExitStack() as tabs:
        for _ in range(CAP - 1):
            tabs.enter_context(open_alerts(daphne_capped, people.dana))
        with open_alerts(daphne_capped, people.dana):
            with pytest.raises(InvalidStatus) as refused:
                open_alerts(daphne_capped, people.dana)
            assert refused.value.response.status_code == 403
            eventually(lambda: group_size(redis_client) == CAP, timeout=15)
            with open_alerts(daphne_capped, people.bob):  # someone else is not affected
                pass
        # A tab closed: its place is free again.
        eventually(lambda: places_held(redis_client, people.dana) == CAP - 1, timeout=15)
        tabs.enter_context(open_alerts(daphne_capped, people.dana))
    eventually(lambda: group_size(redis_client) == 0
               and places_held(redis_client, people.dana) == 0, timeout=15)


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_an_owner_is_sent_alerts_about_their_own_agents_and_the_cluster_only(people):
    """Issue 12 item 6: oscar, an owner, is never sent drift on alice's agent, live or on
    catch-up; alice is; the cluster's own alerts (the breaker) reach both."""
    from registry.choices import Role
    from tests.conftest import approved_agent, make_person

    def scene():
        try:
            approved_agent(people, "refund-agent")
            return make_person("oscar", Role.OWNER)
        finally:
            connection.close()

    oscar = await sync_to_async(scene)()
    live = {who: communicator(user) for who, user in (("alice", people.alice),
                                                      ("oscar", oscar))}
    for comm in live.values():
        assert (await comm.connect(timeout=30))[0]
    await sync_to_async(publish)(
        ("drift.detected", {"agent": "refund-agent", "severity": "high",
                            "pointer": "/tools/crm.search"}),
        ("breaker.tripped", {"message": "10 of 49 agents drifted", "severity": "high"}))
    got = {}
    for who, comm in live.items():
        got[who] = [(await comm.receive_json_from(timeout=30))["event"]
                    for _ in range(2 if who == "alice" else 1)]
        assert await comm.receive_nothing(timeout=0.3)
        await comm.disconnect()
    assert got == {"alice": ["drift.detected", "breaker.tripped"],
                   "oscar": ["breaker.tripped"]}
    again = connect_since(oscar, 0)
    assert (await again.connect(timeout=30))[0]
    assert [(await again.receive_json_from(timeout=30))["event"]] == ["breaker.tripped"]
    assert await again.receive_nothing(timeout=0.3)
    await again.disconnect()
