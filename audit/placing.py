"""Who may place entries in the log (give them seq, hashes and tree position): one transaction
at a time, as the holder of the placing lock.

On PostgreSQL the lock is an advisory lock taken before the chain head's row lock: trying it
writes nothing (no row version, no WAL), so a writer that finds it taken queues its entry in the
same statement and never waits. SQLite serialises every writing transaction already, so there
the lock is always free and every entry is placed in its own transaction.

Whoever releases the lock reads the queue again afterwards (sequencing.settle, the workers'
drain): a writer that found the lock taken has committed its entry before its try failed, so
the holder's next read after releasing sees it, and no entry is stranded.
"""

import json
from typing import Any

from django.db import connection

KEY = 0x41554449  # "AUDI": the one placing lock of this database

QUEUE_UNLESS_FREE = """
    INSERT INTO audit_auditpendingentry
        (at, actor, action, target, agent, before, after, reason, request_id)
    SELECT %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s
    WHERE NOT pg_try_advisory_xact_lock(%s)
    RETURNING id"""


def _postgresql() -> bool:
    return connection.vendor == "postgresql"


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def queue_unless_free(content: dict[str, Any]) -> int | None:
    """In the writer's transaction: queue the entry if another transaction holds the lock (the
    queued row's id), else take the lock until the commit and queue nothing (None). One
    statement either way, the shape of a bare INSERT."""
    if not _postgresql():
        return None
    with connection.cursor() as cursor:
        cursor.execute(QUEUE_UNLESS_FREE, [
            content["at"], content["actor"], content["action"], content["target"],
            content["agent"], _json(content["before"]), _json(content["after"]),
            content["reason"], content["request_id"], KEY])
        row = cursor.fetchone()
    return row[0] if row else None


def hold() -> None:
    """Take the lock until this transaction ends, waiting for the holder if there is one."""
    if _postgresql():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [KEY])


def try_hold_if_queued() -> bool:
    """Outside a transaction: take the lock for this session if anything is queued and no one
    holds it (one round trip); release() gives it back."""
    with connection.cursor() as cursor:
        if _postgresql():
            cursor.execute("SELECT CASE WHEN EXISTS (SELECT 1 FROM audit_auditpendingentry) "
                           "THEN pg_try_advisory_lock(%s) ELSE false END", [KEY])
        else:
            cursor.execute("SELECT EXISTS (SELECT 1 FROM audit_auditpendingentry)")
        return bool(cursor.fetchone()[0])


def release() -> None:
    if _postgresql():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [KEY])
