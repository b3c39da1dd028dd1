"""Live websocket connections per person, counted in Redis across web processes, so that one
person holds at most WS_MAX_CONNECTIONS_PER_USER at once. Each connection renews its claim while
it lives; a claim not renewed for STALE_SECONDS (its process died) no longer counts."""

import time

import redis
from django.conf import settings

from config import redis_connection

KEY = "ws:live:{user_id}"
RENEW_SECONDS = 30
STALE_SECONDS = 120

# Drop stale claims, refuse when the person is at the cap, else claim (atomic across processes).
_CLAIM = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[4]) == false
        and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
    return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""


def _connection() -> redis.Redis:
    return redis_connection.client()


def claim(user_id: int, channel: str) -> bool:
    """Count this connection against the person's cap: False when they are at it. Raises
    RedisError."""
    now = time.time()
    return bool(_connection().eval(
        _CLAIM, 1, KEY.format(user_id=user_id), now - STALE_SECONDS, now,
        settings.WS_MAX_CONNECTIONS_PER_USER, channel, STALE_SECONDS * 2))


def renew(user_id: int, channel: str) -> None:
    """The connection is still live (called every RENEW_SECONDS)."""
    key = KEY.format(user_id=user_id)
    pipe = _connection().pipeline(transaction=False)
    pipe.zadd(key, {channel: time.time()}, xx=True)
    pipe.expire(key, STALE_SECONDS * 2)
    pipe.execute()


def release(user_id: int, channel: str) -> None:
    """The connection ended: it no longer counts."""
    _connection().zrem(KEY.format(user_id=user_id), channel)

