"""ASGI: `GET /api/v1/agents/{name}/desired-state?wait=N` (N seconds, at most 60) is held
until the answer changes, so a suspension reaches a running agent at once.

The held request costs no thread and no database while it waits: the desired-state view is
run (through the whole Django stack: authentication, the ETag, a revoked token's 401) once
at the start and again only when a Redis message announces a change to that agent
(`registry.desired_push`), or every `RECHECK_SECONDS` in case a message was lost or a
grant expired on its own. A 304 at the end of the wait says nothing changed. Without
`wait` (or under WSGI, which never reaches this) the view answers at once, as before."""

import asyncio
import contextlib
import json
import logging
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

import redis
import redis.asyncio
from django.conf import settings

from config.api_errors import error_body
from registry.desired_push import CHANNEL_PREFIX, RECHECK_SECONDS

log = logging.getLogger(__name__)

ASGIApp = Callable[..., Awaitable[None]]
PATH = re.compile(r"^/api/v1/agents/(?P<name>[-a-zA-Z0-9_]+)/desired-state/?$")
MAX_WAIT_SECONDS = 60.0


class ChangeListener:
    """One Redis subscription per process, waking the held polls of the agent it names."""

    def __init__(self) -> None:
        self.waiters: dict[str, set[asyncio.Event]] = {}
        self.subscribed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def waiter(self, name: str) -> AsyncIterator[asyncio.Event]:
        """An event set whenever a change to `name` is announced, while the block runs."""
        event = asyncio.Event()
        self.waiters.setdefault(name, set()).add(event)
        if self.task is None or self.task.done():
            self.subscribed = asyncio.Event()
            self.task = asyncio.get_running_loop().create_task(self._listen())
        with contextlib.suppress(TimeoutError):
            # A change announced before the subscription stands is found by the first look
            # or by the recheck; waiting a moment here makes that rare.
            await asyncio.wait_for(self.subscribed.wait(), timeout=1.0)
        try:
            yield event
        finally:
            holders = self.waiters.get(name, set())
            holders.discard(event)
            if not holders:
                self.waiters.pop(name, None)

    async def _listen(self) -> None:
        while self.waiters:
            client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.psubscribe(f"{CHANNEL_PREFIX}*")
                    self.subscribed.set()
                    while self.waiters:
                        message = await pubsub.get_message(ignore_subscribe_messages=True,
                                                           timeout=1.0)
                        if message is not None:
                            self._wake(message["channel"])
            except (redis.RedisError, OSError) as error:
                log.warning("desired-state long-poll: no Redis subscription (%s); held polls "
                            "look again every %ss", error, RECHECK_SECONDS)
                await asyncio.sleep(1.0)
            finally:
                self.subscribed.clear()
                await client.aclose()

    def _wake(self, channel: bytes | str) -> None:
        text = channel.decode() if isinstance(channel, bytes) else channel
        for event in self.waiters.get(text.removeprefix(CHANNEL_PREFIX), ()):
            event.set()


def parse_wait(text: str) -> float | str:
    """A `wait` query value in seconds, or why it is not one (the 400's message)."""
    try:
        wait = float(text)
    except ValueError:
        return f"wait must be a number of seconds; got {text!r}"
    if not (math.isfinite(wait) and 0 <= wait <= MAX_WAIT_SECONDS):
        return f"wait must be between 0 and {MAX_WAIT_SECONDS:g} seconds; got {text!r}"
    return wait


def requested_wait(scope: dict[str, Any]) -> float | None | str:
    """The `wait` asked for: seconds, None when absent, or the error message."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("wait")
    return parse_wait(values[-1]) if values else None


class DesiredStateLongPoll:
    """Holds desired-state requests that ask to `wait`; hands every other request on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.listener: ChangeListener | None = None

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]],
                       send: Callable[[dict], Awaitable[None]]) -> None:
        match = PATH.match(scope.get("path", "")) if scope["type"] == "http" else None
        if match is None or scope.get("method") != "GET":
            return await self.app(scope, receive, send)
        wait = requested_wait(scope)
        if wait is None:
            return await self.app(scope, receive, send)
        if isinstance(wait, str):
            return await _send_error(send, wait)
        if self.listener is None:
            self.listener = ChangeListener()
        await self._hold(self.listener, match["name"], wait, scope, receive, send)

    async def _hold(self, listener: ChangeListener, name: str, wait: float, scope: dict,
                    receive: Callable[[], Awaitable[dict]],
                    send: Callable[[dict], Awaitable[None]]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        request = await receive()  # a GET's (empty) body, replayed to each look
        gone = asyncio.Event()
        watcher = loop.create_task(_until_disconnect(receive, gone))
        try:
            async with listener.waiter(name) as changed:
                while True:
                    changed.clear()  # a change announced during the look wakes the next one
                    answer = await _look(self.app, scope, request, gone)
                    left = deadline - loop.time()
                    if answer.status != 304 or left <= 0 or gone.is_set():
                        return await answer.replay(send)
                    woken = loop.create_task(changed.wait())
                    left_early = loop.create_task(gone.wait())
                    _, pending = await asyncio.wait({woken, left_early},
                                                    timeout=min(RECHECK_SECONDS, left),
                                                    return_when=asyncio.FIRST_COMPLETED)
                    for task in pending:
                        task.cancel()
        finally:
            watcher.cancel()


class CapturedResponse:
    """One run of the view, kept until it is known whether to send it."""

    def __init__(self) -> None:
        self.messages: list[dict] = []

    @property
    def status(self) -> int:
        return int(self.messages[0]["status"]) if self.messages else 500

    async def collect(self, message: dict) -> None:
        self.messages.append(message)

    async def replay(self, send: Callable[[dict], Awaitable[None]]) -> None:
        for message in self.messages:
            await send(message)


async def _look(app: ASGIApp, scope: dict, request: dict, gone: asyncio.Event
                ) -> CapturedResponse:
    answer = CapturedResponse()
    delivered = False

    async def replay_receive() -> dict:
        nonlocal delivered
        if not delivered:
            delivered = True
            return request
        await gone.wait()
        return {"type": "http.disconnect"}

    await app(scope, replay_receive, answer.collect)
    return answer


async def _until_disconnect(receive: Callable[[], Awaitable[dict]], gone: asyncio.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


async def _send_error(send: Callable[[dict], Awaitable[None]], message: str) -> None:
    body = error_body(400, message, [{"pointer": "/wait", "message": message}])
    content = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": 400,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(content)).encode())]})
    await send({"type": "http.response.body", "body": content})
