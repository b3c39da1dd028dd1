"""Refuse a connection pooler that shares one PostgreSQL session between clients.

The audit writer places entries under a session-level advisory lock taken in one statement and
released in a later one, and prepares its statements once per session (audit/placing.py,
config/prepared.py). Behind PgBouncer in transaction or statement mode, consecutive statements
of one client can run in different server sessions and one server session serves many clients:
a lock would be released in a session that does not hold it (and kept in one nobody releases),
and a prepared statement would be missing. So the first PostgreSQL connection of every process
checks, with the very property the writer relies on: a session-level lock taken by this
connection must not be granted to a second one. If it is, start-up stops with the reason.
PgBouncer in session mode, and no pooler, pass.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.core.exceptions import ImproperlyConfigured

PROBE_LOCK = 0x61676F76  # "agov": a key nothing else in the product locks
TRIES = 3
_checked: set[str] = set()


def sessions_are_shared(params: dict[str, Any]) -> bool:
    """True when a second client connection is given this connection's server session."""
    with psycopg.connect(**params, autocommit=True) as first, \
            psycopg.connect(**params, autocommit=True) as second:
        for _ in range(TRIES):
            (mine,) = first.execute("SELECT pg_try_advisory_lock(%s)", [PROBE_LOCK]).fetchone()
            try:
                (theirs,) = second.execute("SELECT pg_try_advisory_lock(%s)",
                                           [PROBE_LOCK]).fetchone()
                if theirs:
                    second.execute("SELECT pg_advisory_unlock(%s)", [PROBE_LOCK])
            finally:
                first.execute("SELECT pg_advisory_unlock(%s)", [PROBE_LOCK])
            if mine and theirs:
                return True
    return False


def refuse_shared_sessions(sender: Any, connection: Any, **kwargs: Any) -> None:
    """`connection_created` receiver: check each PostgreSQL database once per process."""
    if connection.vendor != "postgresql" or connection.alias in _checked:
        return
    _checked.add(connection.alias)
    if sessions_are_shared(connection.get_connection_params()):
        raise ImproperlyConfigured(
            f"Database {connection.alias!r} hands one PostgreSQL session to several clients "
            "(a pooler in transaction or statement mode, such as PgBouncer's default "
            "pool_mode=transaction). The audit trail's writer needs its own session: point "
            "DATABASE_URL at PostgreSQL directly, or at PgBouncer with pool_mode=session.")
