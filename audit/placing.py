"""Who may place entries in the log (give them seq, hashes and tree position): one transaction
at a time, as the holder of the placing lock.

On PostgreSQL the lock is an advisory lock taken before the chain head's row lock: trying it
writes nothing (no row version, no WAL), so a writer that finds it taken queues its entry in the
same statement and never waits. SQLite serialises every writing transaction already, so there
the lock is always free and every entry is placed in its own transaction.

Whoever releases the lock reads the queue again afterwards (audit.actions.settle, the workers'
drain) and places what it finds; the next holder places the whole queue before its own entry.
A writer that found the lock taken but commits only after the holder's last read waits for
the next holder or for the workers' sequencer, which runs every AUDIT_SEQUENCE_DELAY_SECONDS:
nothing is stranded longer than that, and no writer pays a look-up of its own after its commit.
"""

import json
from typing import Any

from django.db import connection

from audit.tree import LEVEL_SHIFT
from config.prepared import prepared_cursor

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
    cursor = prepared_cursor()
    cursor.execute(QUEUE_UNLESS_FREE, [
        content["at"], content["actor"], content["action"], content["target"],
        content["agent"], _json(content["before"]), _json(content["after"]),
        content["reason"], content["request_id"], KEY])
    row = cursor.fetchone()
    return row[0] if row else None


def hold() -> None:
    """Take the lock until this transaction ends, waiting for the holder if there is one."""
    if _postgresql():
        cursor = prepared_cursor()
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [KEY])


def try_hold_if_queued() -> bool:
    """Outside a transaction: take the lock for this session if anything is queued and no one
    holds it (one round trip); release() gives it back."""
    # The oldest key, read from the index: a plain EXISTS scanned the table, walking every row
    # deleted since the last vacuum (a queue's table is mostly such rows).
    queued = "(SELECT id FROM audit_auditpendingentry ORDER BY id LIMIT 1) IS NOT NULL"
    if not _postgresql():
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {queued}")
            return bool(cursor.fetchone()[0])
    cursor = prepared_cursor()
    cursor.execute(f"SELECT CASE WHEN {queued} THEN pg_try_advisory_lock(%s) ELSE false END",
                   [KEY])
    return bool(cursor.fetchone()[0])


def release() -> None:
    if _postgresql():
        cursor = prepared_cursor()
        cursor.execute("SELECT pg_advisory_unlock(%s)", [KEY])


PENDING_COLUMNS = ("at", "actor", "action", "target", "agent", "before", "after", "reason",
                   "request_id")
PENDING_TYPES = ("timestamptz", "varchar", "varchar", "varchar", "varchar", "jsonb", "jsonb",
                 "text", "varchar")
ENTRY_COLUMNS = ("seq", "at", "actor", "action", "target", "agent", "before", "after", "reason",
                 "request_id", "prev_hash", "hash", "canonical")
ENTRY_ARRAYS = ("bigint[]", "timestamptz[]", "text[]", "text[]", "text[]", "text[]", "jsonb[]",
                "jsonb[]", "text[]", "text[]", "text[]", "text[]", "text[]")
# A batch of any size in one statement of one shape: a column per array parameter (a row of
# placeholders per entry made the text so long that the driver re-parsed it on every batch,
# which cost more than the database's work, and a plan per batch size). Arrays go in binary:
# the text format quotes every element with a regular expression.
STORE = (
    f"WITH placed AS (INSERT INTO audit_auditentry ({', '.join(ENTRY_COLUMNS)}) "
    f"SELECT * FROM unnest({', '.join(f'%b::{kind}' for kind in ENTRY_ARRAYS)})), "
    "grown AS (INSERT INTO audit_audittreenode (position, hash) "
    "SELECT * FROM unnest(%b::bigint[], %b::text[])) "
    "UPDATE audit_auditchainhead SET seq = %s, hash = %s WHERE id = 1")


def store(entries: list[dict[str, Any]], nodes: list[tuple[int, str]], seq: int,
          hash_: str) -> bool:
    """On PostgreSQL, write placed entries (their ENTRY_COLUMNS), their tree nodes and the new
    head in one statement (one round trip while the lock is held); False elsewhere, for the
    caller's ORM path."""
    if not _postgresql():
        return False
    columns = [[entry[c] for entry in entries] for c in ENTRY_COLUMNS]
    for name in ("before", "after"):
        index = ENTRY_COLUMNS.index(name)
        columns[index] = [_json(value) for value in columns[index]]
    positions, hashes = zip(*nodes, strict=True) if nodes else ((), ())
    cursor = prepared_cursor()
    cursor.execute(STORE, [*columns, list(positions), list(hashes), seq, hash_])
    return True


# The head, the stored tree nodes on its right edge (one per set bit of its size: the subtree at
# level L is at index size >> L minus one), and the oldest queued entries, deleted: everything a
# placer reads, in one round trip. The first row carries the head, the rest the entries.
CLAIM = f"""
    WITH head AS (SELECT seq, hash FROM audit_auditchainhead WHERE id = 1 FOR NO KEY UPDATE),
    edge AS (
        SELECT node.position, node.hash
        FROM head CROSS JOIN generate_series(0, 62) AS level JOIN audit_audittreenode AS node
            ON node.position = (level::bigint << {LEVEL_SHIFT}) | ((head.seq >> level) - 1)
        WHERE (head.seq >> level) & 1 = 1),
    taken AS (  -- by key (= ANY), never a scan of the rows deleted since the last vacuum
        DELETE FROM audit_auditpendingentry WHERE id = ANY(ARRAY(
            SELECT id FROM audit_auditpendingentry ORDER BY id LIMIT %s))
        RETURNING id, {', '.join(PENDING_COLUMNS)})
    SELECT 0, {', '.join(f'NULL::{kind}' for kind in PENDING_TYPES)}, head.seq, head.hash,
        ARRAY(SELECT position FROM edge), ARRAY(SELECT hash FROM edge)
    FROM head
    UNION ALL
    SELECT *, NULL, NULL, NULL, NULL FROM taken"""


def claim(limit: int) -> tuple[tuple[int, str, dict[int, bytes]] | None,
                               list[dict[str, Any]]] | None:
    """On PostgreSQL, as the holder of the lock: the locked head (seq, hash and its stored
    frontier, level -> hash; None if the head row does not exist yet) and the oldest `limit`
    queued entries' contents, oldest first, removed from the queue, in one statement (the
    caller places them in the same transaction); None elsewhere, for the caller's ORM path."""
    if not _postgresql():
        return None
    cursor = prepared_cursor()
    cursor.execute(CLAIM, [limit])
    rows = cursor.fetchall()
    head, queued = None, []
    for row in rows:
        if row[0] == 0:
            seq, hash_, positions, hashes = row[-4:]
            stored = {position >> LEVEL_SHIFT: bytes.fromhex(node)
                      for position, node in zip(positions, hashes, strict=True)}
            # A node missing from the store breaks the tree: fail as tree.load's callers do.
            frontier = {level: stored[level] for level in range(seq.bit_length())
                        if seq >> level & 1}
            head = (seq, hash_, frontier)
        else:
            queued.append(row[:-4])
    return head, _contents(sorted(queued))


def take_queue(limit: int) -> list[dict[str, Any]] | None:
    """On PostgreSQL, remove the oldest `limit` queued entries and return their contents,
    oldest first, in one statement (the caller holds the lock and places them in the same
    transaction); None elsewhere, for the caller's ORM path."""
    if not _postgresql():
        return None
    cursor = prepared_cursor()
    cursor.execute(
        f"DELETE FROM audit_auditpendingentry WHERE id = ANY(ARRAY(SELECT id FROM "
        f"audit_auditpendingentry ORDER BY id LIMIT %s)) "
        f"RETURNING id, {', '.join(PENDING_COLUMNS)}", [limit])
    rows = sorted(cursor.fetchall())
    return _contents(rows)


def _contents(rows: list[Any]) -> list[dict[str, Any]]:
    """Queued rows (id first, then PENDING_COLUMNS) as entry contents."""
    taken = []
    for _, *values in rows:
        content = dict(zip(PENDING_COLUMNS, values, strict=True))
        for name in ("before", "after"):
            if isinstance(content[name], str | bytes):
                content[name] = json.loads(content[name])
        taken.append(content)
    return taken
