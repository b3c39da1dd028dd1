"""How every process reaches the work-queue Redis: `REDIS_URL`, or through Redis Sentinel.

With `REDIS_SENTINELS` set, the sentinels name the current primary of `REDIS_SENTINEL_MASTER`
and `REDIS_URL` gives only the database number and password. Clients retry a command that
met a closed connection, a timeout or a read-only replica (an old primary during a failover)
with backoff for about ten seconds, asking the sentinels again on every reconnect
(`PrimaryFollowingConnection`), so a failover is a pause, not an error. RQ's queues and the
channel layer are configured the same way in `config/settings.py` (`RedisTarget.rq_queue`,
`RedisTarget.channel_host`); the few clients the product makes itself come from `client()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import unquote, urlparse

import redis
from django.conf import settings
from redis.asyncio import sentinel as async_sentinel
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelManagedConnection

RETRY_ON = [redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError]


def retry() -> Retry:
    """About ten seconds of retries (0.1 s doubling to 2 s between tries)."""
    return Retry(ExponentialBackoff(cap=2.0, base=0.1), 9)


def async_retry() -> AsyncRetry:
    """`retry()` for redis.asyncio (the channel layer)."""
    return AsyncRetry(ExponentialBackoff(cap=2.0, base=0.1), 9)


class PrimaryFollowingConnection(SentinelManagedConnection):
    """A connection that asks the sentinels for the primary every time it (re)connects.

    redis-py (8.1) asks them only in `connect()`; a command retried after its connection
    dropped reconnects through `connect_check_health`, to the address it had. After a
    failover, a command in flight when the primary died (a worker's blocking dequeue) retried
    against the dead primary until it gave up, and the worker quit.
    """

    def connect_check_health(self, check_health: bool = True,
                             retry_socket_connect: bool = True) -> None:
        if self._sock or not self.connection_pool.is_master:
            return super().connect_check_health(check_health, retry_socket_connect)

        def attempt() -> None:
            self.host, self.port = self.connection_pool.get_master_address()
            super(PrimaryFollowingConnection, self).connect_check_health(
                check_health, retry_socket_connect=False)

        if retry_socket_connect:
            return self.retry.call_with_retry(attempt, lambda error: self.disconnect(error=error))
        return attempt()


class AsyncPrimaryFollowingConnection(async_sentinel.SentinelManagedConnection):
    """The channel layer's connection: `PrimaryFollowingConnection` for redis.asyncio."""

    async def connect_check_health(self, check_health: bool = True,
                                   retry_socket_connect: bool = True) -> None:
        if self.is_connected or not self.connection_pool.is_master:
            return await super().connect_check_health(check_health, retry_socket_connect)

        async def attempt() -> None:
            self.host, self.port = await self.connection_pool.get_master_address()
            await super(AsyncPrimaryFollowingConnection, self).connect_check_health(
                check_health, retry_socket_connect=False)

        if retry_socket_connect:
            return await self.retry.call_with_retry(
                attempt, lambda error: self.disconnect(error=error))
        return await attempt()


@dataclass(frozen=True)
class RedisTarget:
    """Where Redis is: one URL, or a Sentinel master with the URL's database and password."""

    url: str
    sentinels: tuple[tuple[str, int], ...] = ()
    master: str = ""

    @property
    def db(self) -> int:
        path = urlparse(self.url).path.strip("/")
        return int(path) if path.isdigit() else 0

    @property
    def password(self) -> str | None:
        secret = urlparse(self.url).password
        return unquote(secret) if secret else None

    def rq_queue(self) -> dict[str, Any]:
        """The connection part of one RQ_QUEUES entry (django_rq)."""
        if not self.sentinels:
            return {"URL": self.url}
        return {"SENTINELS": list(self.sentinels), "MASTER_NAME": self.master, "DB": self.db,
                "PASSWORD": self.password,
                "CONNECTION_KWARGS": {"retry": retry(), "retry_on_error": RETRY_ON,
                                      "connection_class": PrimaryFollowingConnection},
                "SENTINEL_KWARGS": {"socket_timeout": 1}}

    def channel_host(self, **options: Any) -> dict[str, Any]:
        """One host of the channel layer's CONFIG (channels_redis)."""
        if not self.sentinels:
            return {"address": self.url, **options}
        return {"sentinels": list(self.sentinels), "master_name": self.master, "db": self.db,
                "password": self.password, "sentinel_kwargs": {"socket_timeout": 1},
                "retry": async_retry(), "retry_on_error": RETRY_ON,
                "connection_class": AsyncPrimaryFollowingConnection, **options}


def parse_sentinels(entries: list[str]) -> tuple[tuple[str, int], ...]:
    """`host:port` entries, the port required."""
    found = []
    for entry in entries:
        host, _, port = entry.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"expected host:port; got {entry!r}")
        found.append((host.strip("[]"), int(port)))
    return tuple(found)


@cache
def _client(target: RedisTarget, socket_timeout: float | None) -> redis.Redis:
    if not target.sentinels:
        return redis.Redis.from_url(target.url, socket_timeout=socket_timeout,
                                    socket_connect_timeout=socket_timeout)
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs={"socket_timeout": 1},
                        socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout)
    return sentinel.master_for(target.master, db=target.db, password=target.password,
                               retry=retry(), retry_on_error=RETRY_ON,
                               connection_class=PrimaryFollowingConnection)


def target_from_settings() -> RedisTarget:
    return RedisTarget(settings.REDIS_URL, settings.REDIS_SENTINELS,
                       settings.REDIS_SENTINEL_MASTER)


def client(socket_timeout: float | None = None) -> redis.Redis:
    """A client of the work-queue Redis, one per process and target (it holds a pool)."""
    return _client(target_from_settings(), socket_timeout)


def probe() -> redis.Redis:
    """A client for health checks: answers within about a second, never retries."""
    target = target_from_settings()
    if not target.sentinels:
        return redis.Redis.from_url(target.url, socket_timeout=1, socket_connect_timeout=1)
    return Sentinel(list(target.sentinels), sentinel_kwargs={"socket_timeout": 1},
                    socket_timeout=1, socket_connect_timeout=1).master_for(
        target.master, db=target.db, password=target.password)
