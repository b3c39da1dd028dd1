"""WS /ws/alerts: signed-in people receive alerts sent after commit, through Redis."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.db import connection, transaction

from config.asgi import application
from reconciliation import alerts
from reconciliation.consumers import AlertsConsumer
from tests.conftest import assert_trail_whole


def communicator(user) -> WebsocketCommunicator:
    app = AlertsConsumer.as_asgi()
    comm = WebsocketCommunicator(app, "/ws/alerts")
    comm.scope["user"] = user
    return comm


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_anonymous_connections_are_refused():
    comm = communicator(AnonymousUser())
    connected, code = await comm.connect()
    assert connected is False and code == 4401


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_cross_origin_connections_are_refused():
    comm = WebsocketCommunicator(application, "/ws/alerts",
                                 headers=[(b"origin", b"http://evil.example")])
    connected, _ = await comm.connect()
    assert connected is False


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_an_alert_broadcast_after_commit_reaches_a_signed_in_reviewer(people):
    comm = communicator(people.dana)
    connected, _ = await comm.connect()
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
    message = await comm.receive_json_from(timeout=5)
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
    await first.connect()
    await sync_to_async(publish)(("drift.detected", {"agent": "a2", "severity": "low"}))
    seen = await first.receive_json_from(timeout=5)
    await first.disconnect()
    # While disconnected, two more alerts happen.
    await sync_to_async(publish)(("drift.corrected", {"agent": "a2", "severity": "low"}),
                                 ("escalation.opened", {"agent": "a3", "severity": "high"}))
    again = WebsocketCommunicator(AlertsConsumer.as_asgi(), f"/ws/alerts?since={seen['id']}")
    again.scope["user"] = people.dana
    again.scope["query_string"] = f"since={seen['id']}".encode()
    await again.connect()
    caught_up = [await again.receive_json_from(timeout=5) for _ in range(2)]
    assert [(m["event"], m["agent"], m["replayed"]) for m in caught_up] == [
        ("drift.corrected", "a2", True), ("escalation.opened", "a3", True)]
    assert await again.receive_nothing(timeout=0.3)
    await again.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_subscriptions_filter_by_severity_and_agent(people):
    comm = WebsocketCommunicator(AlertsConsumer.as_asgi(), "/ws/alerts")
    comm.scope["user"] = people.bob
    comm.scope["query_string"] = b"scope=agent&agent=refund-agent&min_severity=high"
    await comm.connect()
    await sync_to_async(publish)(
        ("drift.detected", {"agent": "refund-agent", "severity": "low"}),
        ("drift.detected", {"agent": "other-agent", "severity": "high"}),
        ("drift.detected", {"agent": "refund-agent", "severity": "high"}))
    message = await comm.receive_json_from(timeout=5)
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
    await comm.connect()
    message = await comm.receive_json_from(timeout=5)
    assert (message["id"], message["agent"], message["replayed"]) == (missed, "a9", True)
    await comm.disconnect()
    await sync_to_async(assert_trail_whole)()
