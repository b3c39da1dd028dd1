"""The behaviour-events table in bulk, for ingest: a batch stored in one statement that skips
what is already stored, says which events it stored and writes the batch's outbox row (one
row per batch naming the events it stored, deleted once they are counted). A repeat is the
same (agent name, event id) as a stored event that is not foreign: each such pair has its row
in the plain EventKey table, and an event is stored only when its key row is new (so the
check is one primary-key probe per event however many day partitions the events' table has,
and two batches racing with one event store it once: the second waits on the first's key).
On PostgreSQL a batch is COPYed (in binary) into a session's staging table and stored by one
INSERT ... SELECT; on SQLite, multi-row statements in chunks."""

import json
from collections.abc import Iterable
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from config.prepared import prepared_cursor
from runtime.events import Event
from runtime.models import BehaviourEvent, EventKey, UncountedBatch, UnregisteredAgent

# Per event, from the validated Event (agent_id from the registry).
EVENT_COLUMNS = ("event_id", "agent_id", "agent_name", "ts", "kind", "tool", "resource",
                 "record", "action", "amount", "approved_by", "decision_id", "trace_id",
                 "span_id", "model", "operation", "error", "input_tokens", "output_tokens",
                 "cost", "attributes")
# The same for every event of a batch.
BATCH_COLUMNS = ("source", "received_at", "sender", "sender_user_id", "sender_token_id",
                 "foreign")
SQLITE_ROWS = 30  # rows per statement on SQLite (27 parameters each, under its 999)


def _column(name: str) -> Any:
    return next(f for f in BehaviourEvent._meta.concrete_fields if f.column == name)


def _table() -> str:
    return connection.ops.quote_name(BehaviourEvent._meta.db_table)


def _keys() -> str:
    return connection.ops.quote_name(EventKey._meta.db_table)


def _names(columns: Iterable[str]) -> str:
    return ", ".join(connection.ops.quote_name(c) for c in columns)


def _row(event: Event, agent_id: int | None) -> tuple:
    return (event.id, agent_id, event.agent, event.ts, event.kind, event.tool, event.resource,
            event.record, event.action, event.amount, event.approved_by, event.decision_id,
            event.trace_id, event.span_id, event.model, event.operation, event.error,
            event.input_tokens, event.output_tokens, event.cost,
            json.dumps(event.attributes) if event.attributes is not None else None)


def insert_new(events: list[Event], agent_ids: dict[str, int], batch: dict[str, Any]
               ) -> tuple[set[tuple[str, str]], int | None]:
    """Store the events whose (agent, id) is not stored yet, with the batch's own columns
    (`batch`: source, received_at, sender, sender_user_id, sender_token_id, foreign), and the
    outbox row of those it stored (none when it stored none); returns the (agent, id) of each
    event it did not store (a repeat: usually none, so a batch's thousand stored events are
    not sent back), and the outbox row's id for release_counted. Each stored event takes its
    key (EventKey): two batches racing with one event store it once. Call it inside the
    batch's transaction."""
    if not events:
        return set(), None
    if batch["foreign"]:  # a foreign event reserves no id (BehaviourEvent.Meta)
        raise ValueError("insert_new stores an agent's own events, not foreign ones")
    rows = [_row(e, agent_ids.get(e.agent)) for e in events]
    shared = [batch[c] for c in BATCH_COLUMNS]
    if connection.vendor == "postgresql":  # its statement takes the keys in order itself
        return _insert_postgresql(rows, shared, batch["received_at"])
    # One order for every batch, so two batches with overlapping events cannot deadlock.
    rows.sort(key=lambda r: (r[2], r[0]))
    stored = _insert_chunks(rows, shared)
    repeats = {(row[2], row[0]) for row in rows} - stored.keys()
    if not stored:
        return repeats, None
    times = [row[3] for row in rows if (row[2], row[0]) in stored]
    return repeats, hold_uncounted(list(stored.values()), times, batch["received_at"])


STAGING = "ingest_batch"  # a temporary table per session, emptied at each commit


def _insert_postgresql(rows: list[tuple], shared: list[Any], received_at: datetime
                       ) -> tuple[set[tuple[str, str]], int | None]:
    """COPY the batch into the session's staging table, then one statement that stores what
    is not stored yet, writes the outbox row of what it stored and answers with that row's id
    and the repeats (COPY formats rows in C; array parameters would be formatted in Python;
    the outbox row in the same statement is a round trip less per batch; a row back per
    stored event was a twentieth of a batch's time in the web process)."""
    create, copy_into, store, types = _postgresql_statements()
    with connection.cursor() as cursor:
        cursor.execute(create)
        with cursor.cursor.copy(copy_into) as copy:
            copy.set_types(types)  # binary: a third of the text format's CPU here
            for row in rows:
                copy.write_row(row)
    cursor = prepared_cursor()
    cursor.execute(store, [*shared, received_at])
    rows = cursor.fetchall()
    # The outbox row's id comes in the one row without an agent (None when nothing was stored).
    return ({(agent, event_id) for _, agent, event_id in rows if agent is not None},
            next(held for held, agent, _ in rows if agent is None))


@cache
def _postgresql_statements() -> tuple[str, str, str, list[str]]:
    """The staging table's creation, the COPY into it (binary), the store statement and the
    staging columns' types for the COPY (made once per process: the columns' types were
    looked up for every batch)."""
    column_types = ["text" if c == "attributes" else _column(c).db_type(connection)
                    for c in EVENT_COLUMNS]
    types = ", ".join(f"{c} {t}" for c, t in zip(EVENT_COLUMNS, column_types, strict=True))
    values = ", ".join("n.attributes::jsonb" if c == "attributes" else f"n.{c}"
                       for c in EVENT_COLUMNS)
    batch_values = ", ".join(f"%s::{_column(c).db_type(connection)}" for c in BATCH_COLUMNS)
    # Read and emptied in one statement: a second batch in the same transaction (a caller's
    # outer atomic block) starts from an empty table too. The keys are taken in one order
    # (agent, id), so two batches with overlapping events cannot deadlock on them. Prepared
    # (psycopg keeps it per session): planned once, not per batch. (The repeat check was a
    # NOT EXISTS over the events' table: one probe per day partition, or a hash of the
    # whole table, per batch.) The events are inserted with no conflict clause: each is
    # inserted only with the key it just took, and its own id is new, so none can conflict,
    # and a conflict clause costs every row a speculative insertion (a tenth of the store).
    outbox = connection.ops.quote_name(UncountedBatch._meta.db_table)
    store = (
        f"WITH n AS (DELETE FROM {STAGING} RETURNING *), "
        f"taken AS (INSERT INTO {_keys()} (agent_name, event_id, ts) "
        "SELECT agent_name, event_id, ts FROM n ORDER BY agent_name, event_id "
        "ON CONFLICT DO NOTHING RETURNING agent_name, event_id), stored AS ("
        f"INSERT INTO {_table()} ({_names(EVENT_COLUMNS + BATCH_COLUMNS)}) "
        f"SELECT {values}, {batch_values} FROM n JOIN taken k "
        "ON k.agent_name = n.agent_name AND k.event_id = n.event_id "
        "RETURNING id, ts), "
        f"held AS (INSERT INTO {outbox} (received_at, first_ts, last_ts, events) "
        "SELECT %s::timestamptz, min(ts), max(ts), jsonb_agg(id) FROM stored "
        "HAVING count(*) > 0 RETURNING id) "
        "SELECT (SELECT id FROM held), NULL::text, NULL::text UNION ALL "
        "SELECT NULL, n.agent_name, n.event_id FROM n WHERE NOT EXISTS (SELECT FROM taken k "
        "WHERE k.agent_name = n.agent_name AND k.event_id = n.event_id)")
    return (f"CREATE TEMPORARY TABLE IF NOT EXISTS {STAGING} ({types}) ON COMMIT DELETE ROWS",
            f"COPY {STAGING} ({', '.join(EVENT_COLUMNS)}) FROM STDIN (FORMAT BINARY)", store,
            [t.split("(")[0] for t in column_types])  # varchar(128): varchar


def _insert_chunks(rows: list[tuple], shared: list[Any]) -> dict[tuple[str, str], int]:
    """Per chunk, the keys it takes, then the events whose key it took."""
    fields = [_column(c) for c in EVENT_COLUMNS + BATCH_COLUMNS]
    name, event_id, ts = (EVENT_COLUMNS.index(c) for c in ("agent_name", "event_id", "ts"))
    moment = _column("ts")
    stored: dict[tuple[str, str], int] = {}
    with connection.cursor() as cursor:
        for start in range(0, len(rows), SQLITE_ROWS):
            chunk = rows[start:start + SQLITE_ROWS]
            cursor.execute(
                f"INSERT INTO {_keys()} (agent_name, event_id, ts) VALUES "
                + ", ".join(["(%s, %s, %s)"] * len(chunk))
                + " ON CONFLICT DO NOTHING RETURNING agent_name, event_id",
                [value for row in chunk for value in (
                    row[name], row[event_id], _prepared(moment, row[ts]))])
            taken = set(cursor.fetchall())
            chunk = [row for row in chunk if (row[name], row[event_id]) in taken]
            if not chunk:
                continue
            params = [_prepared(field, value) for row in chunk
                      for field, value in zip(fields, (*row, *shared), strict=True)]
            placeholders = ", ".join(["(" + ", ".join(["%s"] * len(fields)) + ")"] * len(chunk))
            cursor.execute(
                f"INSERT INTO {_table()} ({_names(f.column for f in fields)}) "
                f"VALUES {placeholders} RETURNING agent_name, event_id, id",
                params)
            stored.update(((agent, event_id), pk) for agent, event_id, pk in cursor.fetchall())
    return stored


def _prepared(field: Any, value: Any) -> Any:
    """A value as the database takes it (attributes are JSON text already)."""
    if value is None or field.column == "attributes":
        return value
    return field.get_db_prep_save(value, connection)


def hold_uncounted(row_ids: list[int], times: list[datetime], received_at: datetime) -> int:
    """The outbox row of a batch's stored events (in the batch's transaction; on PostgreSQL
    the store's own statement writes it); returns its id for release_counted."""
    table = connection.ops.quote_name(UncountedBatch._meta.db_table)
    moments = [connection.ops.adapt_datetimefield_value(moment)
               for moment in (received_at, min(times), max(times))]
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} (received_at, first_ts, last_ts, events) "
                       "VALUES (%s, %s, %s, %s) RETURNING id", [*moments, json.dumps(row_ids)])
        return cursor.fetchone()[0]


# A batch's outbox row and the counting of it that queued a job: what the jobs recording the
# batch's broken rules carry, to say they ran (jobs_finished).
Held = tuple[int, int]


def release_counted(batch_id: int, jobs: int = 0, attempt: int = 0) -> None:
    """The batch's events are in their windows and their broken rules queued in `jobs` jobs
    (after commit). With none queued its outbox row goes. On PostgreSQL, outside any
    transaction, that commit does not wait for the disk (synchronous_commit off for that
    transaction alone, in one round trip): a crash that loses the delete leaves the row, and
    recount_events counts its events again, which counting takes (a window's members are
    event ids; a rule broken again is the finding it already made), as it takes a process
    that dies before the delete. Waiting for the disk was a twentieth of a batch's time in
    the web process. With jobs queued the row stays, marked counted, until they have run
    (jobs_finished): a Redis that fails over, or restarts from disk, can lose jobs it has just
    taken, and recount_events counts a batch whose jobs are overdue again. `attempt` is the
    counting of the batch this is (0 for its own request's): a row a later counting took
    over is left to it."""
    if jobs:
        _count_jobs(batch_id, attempt, jobs, counted_at=timezone.now())
        return
    table = connection.ops.quote_name(UncountedBatch._meta.db_table)
    if _commit_unwaited(f"DELETE FROM {table} WHERE id = {int(batch_id)} "
                        f"AND attempt = {int(attempt)}"):
        return
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s AND attempt = %s",
                       [batch_id, attempt])


def _commit_unwaited(*statements: str) -> bool:
    """On PostgreSQL outside any transaction: the statements (no parameters) in a transaction
    of their own whose commit does not wait for the disk, sent as one (simple protocol: one
    round trip); False elsewhere, for the caller to run them as usual."""
    if not (connection.vendor == "postgresql" and connection.get_autocommit()
            and not connection.in_atomic_block):
        return False
    with connection.cursor() as cursor:
        cursor.execute(f"BEGIN; SET LOCAL synchronous_commit TO OFF; {'; '.join(statements)}; "
                       "COMMIT")
    return True


def jobs_added(held: list[Held], count: int = 1) -> None:
    """More jobs answer for these batches (an agent's broken rules requeued in a job of their
    own): said before they are queued, so the batch cannot be released before they run."""
    for batch_id, attempt in held:
        _count_jobs(batch_id, attempt, count)


def jobs_finished(held: list[Held]) -> None:
    """A job that recorded broken rules of these batches has run (its changes committed): the
    last one to finish, after its batch said how many it queued, deletes the batch's row."""
    for batch_id, attempt in held:
        _count_jobs(batch_id, attempt, -1)


def _count_jobs(batch_id: int, attempt: int, change: int,
                counted_at: datetime | None = None) -> None:
    """The batch's unfinished jobs moved by `change` (and its counting's time set); the row
    goes once none is left of a counting that has said how many it queued. One transaction,
    the row locked from the update to the delete, so two jobs finishing at once cannot both
    leave it. Nothing when a later counting took the row over (another attempt) or it is
    gone. On PostgreSQL outside any transaction, one round trip whose commit does not wait
    for the disk (as release_counted's delete): a crash that loses it leaves the row waiting,
    and recount_events counts the batch again once its jobs are overdue."""
    table = connection.ops.quote_name(UncountedBatch._meta.db_table)
    batch_id, attempt, change = int(batch_id), int(attempt), int(change)
    counted = ", queued_at = now()" if counted_at is not None else ""
    if _commit_unwaited(  # the values are integers: no parameters
            f"UPDATE {table} SET jobs = jobs + {change}{counted} "
            f"WHERE id = {batch_id} AND attempt = {attempt}",
            f"DELETE FROM {table} WHERE id = {batch_id} AND attempt = {attempt} AND "
            "jobs <= 0 AND queued_at IS NOT NULL"):
        return
    moment = None if counted_at is None else connection.ops.adapt_datetimefield_value(counted_at)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET jobs = jobs + %s, "
                       "queued_at = COALESCE(%s, queued_at) WHERE id = %s AND attempt = %s",
                       [change, moment, batch_id, attempt])
        cursor.execute(f"DELETE FROM {table} WHERE id = %s AND attempt = %s AND jobs <= 0 "
                       "AND queued_at IS NOT NULL", [batch_id, attempt])


def note_unregistered(counts: dict[str, int], labels: dict[str, str], now: datetime) -> None:
    """Shadow agents: each name's events counted and last seen now, its name kept as sent
    (one upsert per 100 names; in name order, so two batches cannot deadlock)."""
    table = connection.ops.quote_name(UnregisteredAgent._meta.db_table)
    names = sorted(counts)
    with connection.cursor() as cursor:
        for start in range(0, len(names), 100):
            chunk = names[start:start + 100]
            placeholders = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(chunk))
            moment = connection.ops.adapt_datetimefield_value(now)
            cursor.execute(
                f"INSERT INTO {table} (name, display_name, first_seen, last_seen, events, "
                f"registered) VALUES {placeholders} ON CONFLICT (name) DO UPDATE SET "
                "last_seen = excluded.last_seen, "
                f"events = {table}.events + excluded.events, "
                "display_name = CASE WHEN excluded.display_name <> '' "
                f"THEN excluded.display_name ELSE {table}.display_name END",
                [value for name in chunk
                 for value in (name, labels.get(name, ""), moment, moment, counts[name],
                               False)])
