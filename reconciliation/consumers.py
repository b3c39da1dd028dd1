"""The websocket that carries live alerts to signed-in people."""

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from reconciliation.alerts import ALERTS_GROUP, SEVERITY_RANK, wanted

CATCH_UP_LIMIT = 500


@database_sync_to_async
def missed_since(last_id: int, subscription: dict[str, Any]) -> list[dict[str, Any]]:
    """Alerts after `last_id` that the subscription wants, oldest first."""
    from reconciliation.models import AlertEvent

    rows = AlertEvent.objects.filter(pk__gt=last_id).order_by("pk")[:CATCH_UP_LIMIT * 4]
    messages = [row.to_message() for row in rows]
    return [m for m in messages if wanted(m, subscription)][:CATCH_UP_LIMIT]


class AlertsConsumer(AsyncJsonWebsocketConsumer):
    """`WS /ws/alerts?since=ID&scope=all|mine|agent&agent=NAME&min_severity=high`: refuses
    anonymous connections; replays what was missed since the last id seen, then relays live
    alerts the subscription wants."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        query = {k: v[-1] for k, v in parse_qs(self.scope.get("query_string", b"").decode())
                 .items()}
        severity = query.get("min_severity", "")
        self.subscription = {
            "scope": query.get("scope") if query.get("scope") in ("all", "mine", "agent")
            else "all",
            "agent": query.get("agent", ""),
            "min_severity": severity if severity in SEVERITY_RANK else "",
            "user_id": user.pk,
        }
        await self.channel_layer.group_add(ALERTS_GROUP, self.channel_name)
        await self.accept()
        since = query.get("since", "")
        if since.isdigit():
            for message in await missed_since(int(since), self.subscription):
                await self.send_json({**message, "replayed": True})

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(ALERTS_GROUP, self.channel_name)

    async def alert_message(self, event: dict[str, Any]) -> None:
        if wanted(event["message"], self.subscription):
            await self.send_json(event["message"])
