"""The websocket that carries live alerts to signed-in people."""

import asyncio
import contextlib
import logging
import re
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from redis import RedisError

from audit.alert_kinds import AlertKind
from config.unicode_text import is_text
from reconciliation import live_connections
from reconciliation.alerts import (
    ALERTS_GROUP,
    SEVERITY_RANK,
    as_read_by,
    subscription_for,
    wanted,
    wanted_filter,
)
from reconciliation.models import AlertEvent
from registry.choices import Role
from registry.roles import has_role

log = logging.getLogger(__name__)

# ASCII digits only (str.isdigit also takes "²", which int() refuses), and few enough that the
# id fits the database's bigint.
SINCE = re.compile(r"[0-9]{1,18}")
SCOPES = ("all", "mine", "agent")
# Close codes (servers may send 1000 and 3000-4999 only). Before the handshake completes the
# browser sees a 403 instead.
REFUSED = 4400  # a malformed query, or a text frame that is not JSON
NOT_TEXT = 4415  # a binary frame
TOO_MANY = 4429  # the person is at WS_MAX_CONNECTIONS_PER_USER
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
    rows = AlertEvent.objects.filter(wanted_filter(subscription))
    newer = rows.filter(pk__gt=last_id)
    sent = list(newer.order_by("-pk")[:CATCH_UP_LIMIT + 1])[::-1]
    if len(sent) > CATCH_UP_LIMIT:
        sent = sent[1:]
        missed = newer.filter(pk__lt=sent[0].pk)
        first_at = missed.order_by("pk").values_list("at", flat=True).first()
        count = missed.count()
        return [{"event": AlertKind.CATCHUP_TRUNCATED.value, "missed": count, "after_id": last_id,
                 "before_id": sent[0].pk, "at": sent[0].at.isoformat(),
                 "message": f"{count} older alert{'s' if count != 1 else ''} not replayed",
                 "link": _elsewhere(user, first_at, sent[0].at)},
                *(as_read_by(row.to_message(), subscription) for row in sent)]
    seen_at = (AlertEvent.objects.filter(pk__lte=last_id).order_by("-pk")
               .values_list("at", flat=True).first())
    late = [] if seen_at is None else list(
        rows.filter(pk__lte=last_id, at__gte=seen_at - CATCH_UP_OVERLAP)
        .order_by("-pk")[:CATCH_UP_LIMIT])[::-1]
    return [as_read_by(row.to_message(), subscription) for row in (*late, *sent)]


def _query(raw: bytes) -> dict[str, str] | None:
    """The subscription's query parameters, or None when any is malformed."""
    try:
        pairs = parse_qs(raw.decode("ascii"), strict_parsing=False, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return None
    query = {key: values[-1] for key, values in pairs.items()}
    if not all(is_text(key) and is_text(value) for key, value in query.items()):
        return None  # a NUL (%00): the agent's name reaches a database query
    if not SINCE.fullmatch(query.get("since", "0")):
        return None
    if query.get("scope", "all") not in SCOPES:
        return None
    if query.get("min_severity", "") not in ("", *SEVERITY_RANK):
        return None
    return query  # `agent` is free text, compared to alerts' agent names only


class AlertsConsumer(AsyncJsonWebsocketConsumer):
    """`WS /ws/alerts?since=ID&scope=all|mine|agent&agent=NAME&min_severity=high`: refuses
    anonymous connections, malformed queries and people at their connection cap before joining
    anything; replays what was missed since the last id seen, then relays live alerts the
    subscription wants (each id once per connection). Frames from the browser are not part of
    the protocol: a malformed or binary one closes the connection. However it ends, the
    connection leaves its group and frees its place under the cap."""

    joined: bool = False
    claimed_by: int | None = None
    renewing: asyncio.Task | None = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Every exit: a clean close, a handler that raised, or a task cancelled by the
            # server. A channel left in the group would be sent every broadcast for 24 hours.
            await self._leave()

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        query = _query(self.scope.get("query_string", b""))
        if query is None:
            await self.close(code=REFUSED)
            return
        if not await self._claim(user.pk):
            await self.close(code=TOO_MANY)
            return
        self.subscription = await database_sync_to_async(subscription_for)(
            user, scope=query.get("scope", "all"), agent=query.get("agent", ""),
            min_severity=query.get("min_severity", ""))
        self.replayed: set[int] = set()
        # Joined before reading the catch-up, so nothing committed in between is lost; what
        # arrives both ways is sent once.
        self.joined = True
        await self.channel_layer.group_add(ALERTS_GROUP, self.channel_name)
        await self.accept()
        if "since" in query:
            for message in await catch_up(int(query["since"]), self.subscription, user):
                if message.get("id") is not None:
                    self.replayed.add(message["id"])
                await self.send_json({**message, "replayed": True})

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None,
                      **kwargs: Any) -> None:
        """The browser only listens: a binary frame (NOT_TEXT) or text that is not JSON
        (REFUSED) closes the connection; well-formed JSON is ignored."""
        if bytes_data is not None:
            await self.close(code=NOT_TEXT)
            return
        try:
            await self.decode_json(text_data or "")
        except ValueError:
            await self.close(code=REFUSED)

    async def disconnect(self, code: int) -> None:
        await self._leave()

    async def _claim(self, user_id: int) -> bool:
        """A place under the person's cap (kept while the connection lives)."""
        try:
            if not await sync_to_async(live_connections.claim, thread_sensitive=False)(
                    user_id, self.channel_name):
                return False
        except RedisError as error:
            # Without Redis there are no live alerts either; catch-up still works.
            log.warning("websocket cap not checked, Redis unavailable: %s", error)
            return True
        self.claimed_by = user_id
        self.renewing = asyncio.create_task(self._renew(user_id))
        return True

    async def _renew(self, user_id: int) -> None:
        while True:
            await asyncio.sleep(live_connections.RENEW_SECONDS)
            with contextlib.suppress(RedisError):
                await sync_to_async(live_connections.renew, thread_sensitive=False)(
                    user_id, self.channel_name)

    async def _leave(self) -> None:
        """Leave the group and free the place under the cap (safe to call twice)."""
        if self.renewing is not None:
            self.renewing.cancel()
            self.renewing = None
        if self.joined:
            self.joined = False
            try:
                await self.channel_layer.group_discard(ALERTS_GROUP, self.channel_name)
            except Exception:  # the group's expiry removes it in the end
                log.warning("could not leave the alerts group", exc_info=True)
        if self.claimed_by is not None:
            user_id, self.claimed_by = self.claimed_by, None
            try:
                await sync_to_async(live_connections.release, thread_sensitive=False)(
                    user_id, self.channel_name)
            except RedisError:
                log.warning("could not free a websocket place; it lapses", exc_info=True)

    async def alert_message(self, event: dict[str, Any]) -> None:
        message = event["message"]
        if message.get("id") in self.replayed:
            self.replayed.discard(message["id"])
            return
        if wanted(message, self.subscription):
            await self.send_json(as_read_by(message, self.subscription))
