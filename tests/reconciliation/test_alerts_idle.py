"""A reviewer's live feed survives a quiet spell longer than the channel layer's blocking read
(5 s): redis-py 8's default 5 s socket timeout used to tear every idle websocket down."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from reconciliation import alerts
from reconciliation.consumers import AlertsConsumer

QUIET_SECONDS = 7  # longer than channels_redis's 5 s blocking receive and redis-py's default


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_an_alert_after_a_quiet_spell_still_reaches_the_reviewer(people):
    comm = WebsocketCommunicator(AlertsConsumer.as_asgi(), "/ws/alerts")
    comm.scope["user"] = people.dana
    connected, _ = await comm.connect(timeout=30)
    assert connected
    assert await comm.receive_nothing(timeout=QUIET_SECONDS)  # the quiet spell itself
    message = {"id": 10**9, "event": "breaker.tripped", "agent": "", "severity": "high",
               "owner_id": None}
    await sync_to_async(alerts.send_now)(message)
    received = await comm.receive_json_from(timeout=30)
    assert (received["id"], received["event"]) == (10**9, "breaker.tripped")
    await comm.disconnect()
