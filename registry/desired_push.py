"""Wake-ups for agents long-polling their desired state.

An action that changes what an agent's desired-state answer would say (a version approved, a
suspension, a resumption, a retirement, a review restriction, a revoked token) calls
`announce_desired_change` inside its transaction; after commit one Redis message names the
agent, and every web process holding that agent's long-poll (`registry.desired_long_poll`)
answers it at once. Nothing is lost if the message is: a held poll also looks again every
`RECHECK_SECONDS`."""

import logging

import redis
from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)

CHANNEL_PREFIX = "agentgov:desired-state:"
# A held long-poll looks again this often even without a message (a grant that expires on
# its own, a change whose action did not announce it, a lost message).
RECHECK_SECONDS = 5.0


def channel(agent_name: str) -> str:
    """The Redis channel that announces a change to `agent_name`'s desired-state answer."""
    return f"{CHANNEL_PREFIX}{agent_name}"


def announce_desired_change(agent_name: str) -> None:
    """After the current transaction commits, wake the agent's held long-polls."""
    transaction.on_commit(lambda: _publish(agent_name))


def _publish(agent_name: str) -> None:
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2,
                             socket_connect_timeout=2).publish(channel(agent_name), b"1")
    except redis.RedisError as error:
        # The change is committed; the held polls find it at their next recheck.
        log.warning("could not announce %s's desired-state change: %s", agent_name, error)
