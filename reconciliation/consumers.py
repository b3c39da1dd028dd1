"""The websocket that carries live alerts to signed-in people."""

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from reconciliation.alerts import ALERTS_GROUP


class AlertsConsumer(AsyncJsonWebsocketConsumer):
    """`WS /ws/alerts`: refuses anonymous connections, then relays every alert."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        await self.channel_layer.group_add(ALERTS_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(ALERTS_GROUP, self.channel_name)

    async def alert_message(self, event: dict[str, Any]) -> None:
        await self.send_json(event["message"])
