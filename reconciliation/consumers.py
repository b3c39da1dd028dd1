"""The websocket that carries live alerts to signed-in people."""

from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from reconciliation.alerts import (
    ALERTS_GROUP,
    SEVERITY_RANK,
    subscription_for,
    wanted,
    wanted_filter,
)

CATCH_UP_LIMIT = 500
# Ids are taken at insert, so an alert whose transaction commits late carries a lower id than
# alerts already delivered. Catch-up re-reads the alerts inserted up to this long before the
# last one the browser saw (the browser drops the ids it has). A transaction that holds an
# alert uncommitted for longer than this can still be missed on catch-up (never live, and its
# finding and audit rows are there): transactions that write alerts do no network I/O.
CATCH_UP_OVERLAP = timedelta(seconds=60)


def _elsewhere(user: Any, first: Any, last: Any) -> str | None:
    """Where someone can read what catch-up left out: the audit trail for compliance staff
    (for those times), the findings for approvers; nothing for the others."""
    from registry.choices import Role
    from registry.roles import has_role

    if has_role(user, Role.COMPLIANCE):
        return "/audit/?" + urlencode({"since": first.isoformat(), "until": last.isoformat()})
    if has_role(user, Role.APPROVER):
        return "/findings/"
    return None


@database_sync_to_async
def catch_up(last_id: int, subscription: dict[str, Any], user: Any) -> list[dict[str, Any]]:
    """What a reconnecting browser is sent, oldest first: alerts inserted shortly before
    `last_id` (committed late, or already seen: the browser drops those), then everything
    after it. More than CATCH_UP_LIMIT after it: only the newest of them, after a
    `catchup.truncated` message saying how many were left out and where to read them."""
    from reconciliation.models import AlertEvent

    rows = AlertEvent.objects.filter(wanted_filter(subscription))
    newer = rows.filter(pk__gt=last_id)
    sent = list(newer.order_by("-pk")[:CATCH_UP_LIMIT + 1])[::-1]
    if len(sent) > CATCH_UP_LIMIT:
        sent = sent[1:]
        missed = newer.filter(pk__lt=sent[0].pk)
        first_at = missed.order_by("pk").values_list("at", flat=True).first()
        count = missed.count()
        return [{"event": "catchup.truncated", "missed": count, "after_id": last_id,
                 "before_id": sent[0].pk, "at": sent[0].at.isoformat(),
                 "message": f"{count} older alert{'s' if count != 1 else ''} not replayed",
                 "link": _elsewhere(user, first_at, sent[0].at)},
                *(row.to_message() for row in sent)]
    seen_at = (AlertEvent.objects.filter(pk__lte=last_id).order_by("-pk")
               .values_list("at", flat=True).first())
    late = [] if seen_at is None else list(
        rows.filter(pk__lte=last_id, at__gte=seen_at - CATCH_UP_OVERLAP)
        .order_by("-pk")[:CATCH_UP_LIMIT])[::-1]
    return [row.to_message() for row in (*late, *sent)]


class AlertsConsumer(AsyncJsonWebsocketConsumer):
    """`WS /ws/alerts?since=ID&scope=all|mine|agent&agent=NAME&min_severity=high`: refuses
    anonymous connections; replays what was missed since the last id seen, then relays live
    alerts the subscription wants (each id once per connection)."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        query = {k: v[-1] for k, v in parse_qs(self.scope.get("query_string", b"").decode())
                 .items()}
        severity = query.get("min_severity", "")
        self.subscription = await database_sync_to_async(subscription_for)(
            user, scope=query.get("scope") if query.get("scope") in ("all", "mine", "agent")
            else "all", agent=query.get("agent", ""),
            min_severity=severity if severity in SEVERITY_RANK else "")
        self.replayed: set[int] = set()
        # Joined before reading the catch-up, so nothing committed in between is lost; what
        # arrives both ways is sent once.
        await self.channel_layer.group_add(ALERTS_GROUP, self.channel_name)
        await self.accept()
        since = query.get("since", "")
        if since.isdigit():
            for message in await catch_up(int(since), self.subscription, user):
                if message.get("id") is not None:
                    self.replayed.add(message["id"])
                await self.send_json({**message, "replayed": True})

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(ALERTS_GROUP, self.channel_name)

    async def alert_message(self, event: dict[str, Any]) -> None:
        message = event["message"]
        if message.get("id") in self.replayed:
            self.replayed.discard(message["id"])
            return
        if wanted(message, self.subscription):
            await self.send_json(message)
