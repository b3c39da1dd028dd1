"""Live alerts to signed-in browsers, sent through the Redis channel layer after commit."""

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

ALERTS_GROUP = "alerts"


def send_now(event: str, payload: dict[str, Any]) -> None:
    """Deliver one alert to every connected reviewer."""
    message = {"event": event, "at": timezone.now().isoformat(), **payload}
    async_to_sync(get_channel_layer().group_send)(
        ALERTS_GROUP, {"type": "alert.message", "message": message}
    )


def broadcast(event: str, payload: dict[str, Any]) -> None:
    """Send an alert once the current transaction commits (never for a rolled-back change)."""
    transaction.on_commit(lambda: send_now(event, payload))
