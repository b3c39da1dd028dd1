"""Retention: make the coming days' partitions, and let go of data past its days
(reconciliation/retention.py says how many). On PostgreSQL a day goes as a whole partition,
dropped in one statement; on SQLite expired rows are deleted in bounded batches. Each drop or
batch writes its audit entry in its own transaction.

What is never let go: the latest observation of every agent (and of every unregistered
agent) is its current observed state, however old: when its day's partition goes, that row
moves to the default partition first (on SQLite it is left out of the delete)."""

import logging
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import OperationalError, connection, models, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

import audit
from audit.choices import AuditAction
from reconciliation import partitions
from reconciliation.retention import OBSERVATIONS, RUNS, Keep, Kind, keep, kinds

log = logging.getLogger(__name__)

RETENTION = "system:retention"
LOCK_TIMEOUT = "5s"


def model_of(kind: Kind) -> type[models.Model]:
    return apps.get_model(kind.model)


def partitioned() -> bool:
    """Whether retention works by partitions here (PostgreSQL, after the migration)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        return partitions.is_partitioned(cursor, model_of(OBSERVATIONS)._meta.db_table)


def first_kept_day(kind: Kind, now: datetime) -> datetime:
    """The start of the oldest day partition still kept: a day goes once all of it is past."""
    return (now - timedelta(days=keep(kind).days)).replace(hour=0, minute=0, second=0,
                                                           microsecond=0)


def make_partitions(now: datetime | None = None) -> list[str]:
    """Create any missing day partition of every kind, from the oldest day still kept to
    RETENTION_PARTITIONS_AHEAD_DAYS ahead (rows of a missed day wait in the default partition
    and move into theirs here)."""
    now = now or timezone.now()
    created = []
    for kind in kinds():
        first = first_kept_day(kind, now).date()
        last = (now + timedelta(days=settings.RETENTION_PARTITIONS_AHEAD_DAYS)).date()
        table = model_of(kind)._meta.db_table
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                created += partitions.ensure_days(cursor, table, kind.key, first, last)
        except OperationalError as error:  # days ahead leave time for the next run
            log.warning("retention: no new partitions of %s this time: %s", table, error)
    if created:
        log.info("retention: created %d partitions (%s .. %s)", len(created), created[0],
                 created[-1])
    return created


def apply_retention(*, now: datetime | None = None, actor: Any = RETENTION) -> dict[str, int]:
    """Let go of every kind's expired data; per kind, the rows that went."""
    now = now or timezone.now()
    by_partition = partitioned()
    gone = {}
    for kind in kinds():
        limit = keep(kind)
        if by_partition:
            gone[kind.name] = _drop_partitions(kind, limit, now, actor)
            cutoff = first_kept_day(kind, now)
        else:
            gone[kind.name] = _delete_batches(kind, limit, now, actor)
            cutoff = now - timedelta(days=limit.days)
        for label, key in kind.companions:
            _delete_companions(kind, apps.get_model(label), key, cutoff, limit, actor)
    return gone


@transaction.atomic
def _delete_companions(kind: Kind, model: type[models.Model], key: str, cutoff: datetime,
                       limit: Keep, actor: Any) -> int:
    """A companion table's rows older than `cutoff`, in one statement (its time is indexed),
    with one audit entry when any went."""
    table = connection.ops.quote_name(model._meta.db_table)
    column = connection.ops.quote_name(model._meta.get_field(key).column)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE {column} < %s",
                       [connection.ops.adapt_datetimefield_value(cutoff)])
        rows = cursor.rowcount
    if rows:
        audit.record(actor=actor, action=AuditAction.RETENTION_ROWS_DELETED,
                     target=f"table:{model._meta.db_table}",
                     before={"kind": kind.name, "rows": rows, "to": cutoff.isoformat()},
                     reason=f"older than {limit.days} days ({limit.reason})")
    return rows


def _drop_partitions(kind: Kind, limit: Keep, now: datetime, actor: Any) -> int:
    table = model_of(kind)._meta.db_table
    first = first_kept_day(kind, now)
    with connection.cursor() as cursor:
        expired = [p for p in partitions.day_partitions(cursor, table) if p.end <= first]
    gone = 0
    try:
        for part in expired:
            gone += _drop(kind, table, part, limit, actor)
        return gone + _rotate_default(kind, table, first, limit, actor)
    except OperationalError as error:  # a lock not granted in time: the next run goes on
        log.warning("retention: %s stopped after %d rows: %s", table, gone, error)
        return gone


OWNER = ("CASE WHEN {t}.agent_id IS NOT NULL THEN 'a' || {t}.agent_id"
         " WHEN {t}.unregistered_id IS NOT NULL THEN 'u' || {t}.unregistered_id END")


def _goes(kind: Kind, row: str, tables: list[str]) -> str:
    """SQL: row `row` (an alias) is past retention (the cutoff is the query's %s). An
    observation also needs a newer one of its agent in one of `tables`."""
    expired = f'{row}."{kind.key}" < %s'
    if kind is not OBSERVATIONS:
        return expired
    newer = " OR ".join(
        f'EXISTS (SELECT 1 FROM "{t}" n WHERE {OWNER.format(t="n")} = {OWNER.format(t=row)}'
        f" AND n.observed_at > {row}.observed_at)" for t in tables)
    return f"{expired} AND ({OWNER.format(t=row)} IS NULL OR {newer})"


@transaction.atomic
def _rotate_default(kind: Kind, table: str, first: datetime, limit: Keep, actor: Any) -> int:
    """Rows of days that had no partition when they came (the job had not run for longer than
    its days ahead) wait in the default partition, as do latest observations kept past their
    day. When some of them are past retention, the default is swapped for an empty one, what
    is still kept is copied back (into its day's partition, or the new default) and the old
    default is dropped whole."""
    default = partitions.default_name(table)
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT count(*) FROM "{default}" d WHERE {_goes(kind, "d", [table])}',
                       [first])
        going = cursor.fetchone()[0]
        if not going:
            return 0
        _prepare_drop(cursor)
        rows = partitions.row_count(cursor, default)
        expired = f"{default}_expired"
        partitions.detach(cursor, table, default)
        cursor.execute(f'ALTER TABLE "{default}" RENAME TO "{expired}"')
        cursor.execute(f'CREATE TABLE "{default}" PARTITION OF "{table}" DEFAULT')
        columns = _columns(kind)
        goes = _goes(kind, "d", [table, expired])
        details = {}
        if kind is RUNS:
            details["corrections_unlinked"] = _unlink_corrections(
                cursor, f'(SELECT id FROM "{expired}" d WHERE {goes})', [first])
        cursor.execute(f'INSERT INTO "{table}" ({columns}) SELECT {columns} FROM "{expired}" d'
                       f" WHERE NOT ({goes})", [first])
        partitions.drop(cursor, expired)
    audit.record(actor=actor, action=AuditAction.RETENTION_PARTITION_DROPPED,
                 target=f"table:{table}",
                 before={"kind": kind.name, "partition": default, "to": first.isoformat(),
                         "rows": going, "rows_kept": rows - going, **details},
                 reason=f"older than {limit.days} days ({limit.reason})")
    return going


@transaction.atomic
def _drop(kind: Kind, table: str, part: partitions.DayPartition, limit: Keep,
          actor: Any) -> int:
    """Drop one day's partition, with its audit entry; the rows it held."""
    details: dict[str, Any] = {}
    with connection.cursor() as cursor:
        _prepare_drop(cursor)
        rows = partitions.row_count(cursor, part.name)
        if kind is RUNS:
            details["corrections_unlinked"] = _unlink_corrections(
                cursor, f'(SELECT id FROM "{part.name}")')
        if kind is OBSERVATIONS:
            partitions.detach(cursor, table, part.name)
            details["latest_kept"] = _keep_latest_observations(cursor, table, part.name)
        partitions.drop(cursor, part.name)
    audit.record(actor=actor, action=AuditAction.RETENTION_PARTITION_DROPPED,
                 target=f"table:{table}",
                 before={"kind": kind.name, "partition": part.name,
                         "from": part.start.isoformat(), "to": part.end.isoformat(),
                         "rows": rows, **details},
                 reason=f"older than {limit.days} days ({limit.reason})")
    return rows - details.get("latest_kept", 0)


def _prepare_drop(cursor: Any) -> None:
    """Dropping or detaching a partition locks its whole table: wait at most LOCK_TIMEOUT
    for it, so ingest and passes never queue long behind the job (it tries again next run).
    And PostgreSQL will not drop a table with foreign-key checks still pending on its rows
    (written earlier in the caller's transaction): run them now."""
    cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _columns(kind: Kind) -> str:
    return ", ".join(f'"{f.column}"' for f in model_of(kind)._meta.local_concrete_fields)


def _unlink_corrections(cursor: Any, run_ids: str, params: list[Any] | None = None) -> int:
    """Corrections keep their own row; the run that applied them is gone (SET NULL)."""
    table = apps.get_model("reconciliation", "Correction")._meta.db_table
    cursor.execute(f'UPDATE "{table}" SET run_id = NULL WHERE run_id IN {run_ids}', params)
    return cursor.rowcount


def _keep_latest_observations(cursor: Any, table: str, detached: str) -> int:
    """Copy back the rows of a detached day that are still some agent's latest observation;
    with their day gone they land in the default partition. How many."""
    columns = _columns(OBSERVATIONS)
    cursor.execute(
        f'INSERT INTO "{table}" ({columns}) SELECT {columns} FROM ('
        f'  SELECT DISTINCT ON ({OWNER.format(t="d")}) * FROM "{detached}" d'
        f'  WHERE {OWNER.format(t="d")} IS NOT NULL'
        f'  ORDER BY {OWNER.format(t="d")}, d.observed_at DESC, d.id DESC) o'
        f' WHERE NOT EXISTS (SELECT 1 FROM "{table}" n'
        f'  WHERE {OWNER.format(t="n")} = {OWNER.format(t="o")}'
        f'  AND n.observed_at >= o.observed_at)')
    return cursor.rowcount


def _expired(kind: Kind, cutoff: datetime) -> models.QuerySet:
    model = model_of(kind)
    rows = model.objects.filter(**{f"{kind.key}__lt": cutoff})
    if kind is not OBSERVATIONS:
        return rows
    # An observation goes only once a newer one of the same agent supersedes it.
    newer_of_agent = model.objects.filter(agent=OuterRef("agent"),
                                          observed_at__gt=OuterRef("observed_at"))
    newer_of_shadow = model.objects.filter(agent__isnull=True,
                                           unregistered=OuterRef("unregistered"),
                                           observed_at__gt=OuterRef("observed_at"))
    return rows.alias(superseded=Exists(newer_of_agent),
                      shadow_superseded=Exists(newer_of_shadow)).filter(
        Q(agent__isnull=False, superseded=True)
        | Q(agent__isnull=True, unregistered__isnull=False, shadow_superseded=True)
        | Q(agent__isnull=True, unregistered__isnull=True))


def _delete_batches(kind: Kind, limit: Keep, now: datetime, actor: Any) -> int:
    """SQLite: delete expired rows RETENTION_DELETE_BATCH at a time, oldest first, each batch
    in its own transaction with its audit entry."""
    model = model_of(kind)
    cutoff = now - timedelta(days=limit.days)
    expired = _expired(kind, cutoff)
    total = 0
    while True:
        with transaction.atomic():
            batch = list(expired.order_by(kind.key, "pk").values_list("pk", kind.key)
                         [:settings.RETENTION_DELETE_BATCH])
            if not batch:
                return total
            # Django's delete, so what points at these rows follows its on_delete.
            model.objects.filter(pk__in=[pk for pk, _ in batch]).delete()
            audit.record(actor=actor, action=AuditAction.RETENTION_ROWS_DELETED,
                         target=f"table:{model._meta.db_table}",
                         before={"kind": kind.name, "rows": len(batch),
                                 "from": batch[0][1].isoformat(),
                                 "to": batch[-1][1].isoformat()},
                         reason=f"older than {limit.days} days ({limit.reason})")
        total += len(batch)
