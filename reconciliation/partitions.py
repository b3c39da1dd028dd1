"""Daily range partitions on PostgreSQL for the tables that grow without end (events,
observations, runs, alerts): convert a plain table, create days ahead, list and drop days.

One partition per UTC day, named `<table>_pYYYYMMDD`, plus `<table>_default` for a row whose
day has no partition (a day already dropped, or a clock far off), so an insert never fails.
Day, not week: retention is set in days, so a whole partition is dropped as soon as its last
row is past the setting (a week would keep up to six days too many), and the 7-day backtest
and what-if read 8 partitions, not 2 weeks'. At 90 days a table has ~100 partitions, which
PostgreSQL 15 plans and prunes without trouble.

Nothing here runs on SQLite: the tables stay plain there (reconciliation.actions.retention
deletes in batches instead)."""

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

DAY = re.compile(r"_p(\d{8})$")


@dataclass(frozen=True)
class DayPartition:
    """One day's partition: rows with key in [start, end)."""

    name: str
    day: date

    @property
    def start(self) -> datetime:
        return datetime.combine(self.day, time(), tzinfo=UTC)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=1)


def _literal(moment: datetime) -> str:
    return f"'{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S}+00'"


def partition_name(table: str, day: date) -> str:
    return f"{table}_p{day:%Y%m%d}"


def default_name(table: str) -> str:
    return f"{table}_default"


def is_partitioned(cursor: Any, table: str) -> bool:
    cursor.execute("SELECT 1 FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid"
                   " WHERE c.relname = %s AND pg_table_is_visible(c.oid)", [table])
    return cursor.fetchone() is not None


def day_partitions(cursor: Any, table: str) -> list[DayPartition]:
    """The table's day partitions, oldest first (the default partition is not one)."""
    cursor.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                   " JOIN pg_class p ON p.oid = i.inhparent"
                   " WHERE p.relname = %s AND pg_table_is_visible(p.oid)", [table])
    found = []
    for (name,) in cursor.fetchall():
        match = DAY.search(name)
        if match:
            found.append(DayPartition(name, datetime.strptime(match[1], "%Y%m%d").date()))
    return sorted(found, key=lambda p: p.day)


def create_day(cursor: Any, table: str, key: str, day: date) -> bool:
    """Create the partition of one day unless it exists; rows of that day that had landed in
    the default partition move into it. Returns whether it was created."""
    part = DayPartition(partition_name(table, day), day)
    cursor.execute("SELECT to_regclass(%s)", [part.name])
    if cursor.fetchone()[0] is not None:
        return False
    bounds = f"FROM ({_literal(part.start)}) TO ({_literal(part.end)})"
    default = default_name(table)
    in_range = f'"{key}" >= {_literal(part.start)} AND "{key}" < {_literal(part.end)}'
    cursor.execute(f'SELECT 1 FROM "{default}" WHERE {in_range} LIMIT 1')
    if cursor.fetchone() is None:
        cursor.execute(f'CREATE TABLE "{part.name}" PARTITION OF "{table}" FOR VALUES {bounds}')
        return True
    # PostgreSQL refuses a partition whose rows sit in the default: take the default out,
    # move that day's rows into the new partition, and put the default back.
    cursor.execute(f'ALTER TABLE "{table}" DETACH PARTITION "{default}"')
    cursor.execute(f'CREATE TABLE "{part.name}" PARTITION OF "{table}" FOR VALUES {bounds}')
    cursor.execute(f'WITH moved AS (DELETE FROM "{default}" WHERE {in_range} RETURNING *)'
                   f' INSERT INTO "{part.name}" SELECT * FROM moved')
    cursor.execute(f'ALTER TABLE "{table}" ATTACH PARTITION "{default}" DEFAULT')
    return True


def ensure_days(cursor: Any, table: str, key: str, first: date, last: date) -> list[str]:
    """Create every missing day partition from `first` to `last` inclusive; their names."""
    created = []
    day = first
    while day <= last:
        if create_day(cursor, table, key, day):
            created.append(partition_name(table, day))
        day += timedelta(days=1)
    return created


def row_count(cursor: Any, name: str) -> int:
    cursor.execute(f'SELECT count(*) FROM "{name}"')
    return cursor.fetchone()[0]


def detach(cursor: Any, table: str, name: str) -> None:
    cursor.execute(f'ALTER TABLE "{table}" DETACH PARTITION "{name}"')


def drop(cursor: Any, name: str) -> None:
    """Drop a partition (attached or detached): its rows go at once, no row-by-row delete."""
    cursor.execute(f'DROP TABLE "{name}"')


def convert(schema_editor: Any, model: Any, key: str, days: tuple[date, date]) -> None:
    """Turn a model's plain table into one partitioned by day on `key`, keeping its rows, its
    ids and its id sequence. The primary key becomes (id, key) (PostgreSQL wants the partition
    key in every unique constraint); ids still come from one identity sequence, so `id` alone
    stays unique and Django keeps using it as the primary key. Indexes, foreign keys out of
    the table and unique constraints are recreated from the model as Django would create them
    (after the copy, from the schema editor's deferred SQL). Days with rows get a partition,
    and so does every day in `days` (first, last)."""
    table = model._meta.db_table
    old = f"{table}_unpartitioned"
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{old}"')
        strip(cursor, old)
        made = len(schema_editor.deferred_sql)
        sql, params = schema_editor.table_sql(model)
        schema_editor.execute(_partitioned_sql(sql, key), params or None)
        # The field and Meta indexes, as create_model adds them.
        schema_editor.deferred_sql.extend(schema_editor._model_indexes_sql(model))
        later = take_deferred(schema_editor, made)
        schema_editor.execute(f'CREATE TABLE "{default_name(table)}" PARTITION OF "{table}"'
                              " DEFAULT")
        cursor.execute(f'SELECT DISTINCT (date_trunc(\'day\', "{key}" AT TIME ZONE \'UTC\'))::date'
                       f' FROM "{old}"')
        wanted = {day for (day,) in cursor.fetchall()}
        first, last = days
        wanted.update(first + timedelta(days=n) for n in range((last - first).days + 1))
        for day in sorted(wanted):
            create_day(cursor, table, key, day)
        columns = ", ".join(f'"{f.column}"' for f in model._meta.local_concrete_fields)
        cursor.execute(f'INSERT INTO "{table}" ({columns}) SELECT {columns} FROM "{old}"')
        cursor.execute(f'DROP TABLE "{old}"')
        reset_ids(cursor, table)
    for statement in later:  # indexes and keys once the rows are in: faster than row by row
        schema_editor.execute(statement)


def take_deferred(schema_editor: Any, since: int) -> list[Any]:
    """The statements the schema editor deferred since `since`, taken out of its list (so
    they run now, on this table, and not at the end of the migration)."""
    taken = schema_editor.deferred_sql[since:]
    del schema_editor.deferred_sql[since:]
    return taken


def reset_ids(cursor: Any, table: str) -> None:
    """Point the table's id sequence past its highest id."""
    cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'),"
                   f' COALESCE((SELECT max(id) FROM "{table}"), 1),'
                   f' (SELECT max(id) FROM "{table}") IS NOT NULL)', [table])


def strip(cursor: Any, table: str) -> None:
    """Drop a table's constraints and indexes, so their names are free for the new table."""
    cursor.execute("SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass"
                   " AND contype <> 'n'", [table])
    for (name,) in cursor.fetchall():
        cursor.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}" CASCADE')
    cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", [table])
    for (name,) in cursor.fetchall():
        cursor.execute(f'DROP INDEX "{name}"')
    # The identity sequence goes with the old table; the new one is set past its ids.
    cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN "id" DROP IDENTITY IF EXISTS')


def _partitioned_sql(create: str, key: str) -> str:
    """Django's CREATE TABLE with the primary key widened to (id, key), partitioned by key."""
    if create.count(" PRIMARY KEY") != 1:
        raise ValueError(f"expected one inline primary key in {create!r}")
    body = create.replace(" PRIMARY KEY", "", 1)
    return f'{body[:body.rindex(")")]}, PRIMARY KEY ("id", "{key}")) PARTITION BY RANGE ("{key}")'
