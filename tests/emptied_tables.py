"""After a transactional test, the database is emptied by deleting its rows, not by Django's
`flush`.

`flush` truncates every table and then re-creates the content types and permissions. On
PostgreSQL a TRUNCATE gives every table, partition and index a new file, and the four
partitioned tables hold a partition per day a test wrote to (about a hundred by the end of a
run): 0.8-3.6 s per transactional test (a full run on PostgreSQL went from 71.5 to 53 min
without it). A test leaves a few rows in a few dozen tables, and deleting them takes
milliseconds.

The rows are deleted in one transaction with `session_replication_role = replica`, so
neither foreign keys nor the audit tables' append-only triggers stand in the way (the order
of the deletes does not matter); that needs a superuser, as the suite's PostgreSQL is here
and in CI. Anything else (SQLite, another role, a test with `available_apps` or serialized
rollback) is flushed by Django as before. The content types and permissions are kept: `flush`
would only make them again."""

from django.db import DatabaseError, connections, transaction
from django.test import TransactionTestCase

KEPT = frozenset({"django_content_type", "auth_permission"})

_flush = TransactionTestCase._fixture_teardown
_superuser: dict[str, bool] = {}


def _may_skip_triggers(alias: str) -> bool:
    if alias not in _superuser:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            _superuser[alias] = bool(cursor.fetchone()[0])
    return _superuser[alias]


def empty_tables(alias: str) -> None:
    """Delete every row of every model's table on `alias` but the kept ones (PostgreSQL, as
    a superuser)."""
    connection = connections[alias]
    tables = sorted(set(connection.introspection.django_table_names(
        only_existing=True, include_views=False)) - KEPT)
    quote = connection.ops.quote_name
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute("; ".join(f"DELETE FROM {quote(table)}" for table in tables))


def _emptied(self: TransactionTestCase) -> None:
    aliases = list(self._databases_names(include_mirrors=False))
    if (self.available_apps is not None or self.serialized_rollback or any(
            connections[a].vendor != "postgresql" or not _may_skip_triggers(a)
            for a in aliases)):
        return _flush(self)
    try:
        for alias in aliases:
            empty_tables(alias)
    except DatabaseError:  # a test that left the schema unusable: Django's way, as before
        return _flush(self)
    return None


def install() -> None:
    TransactionTestCase._fixture_teardown = _emptied
