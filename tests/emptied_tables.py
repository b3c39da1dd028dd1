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
would only make them again.

A transactional test's changes to the schema are not rolled back either: one that disables
the audit trail's append-only triggers or drops its column binding and does not put them back
would leave every later test without them. So the guards (every user trigger and its switch,
and the audit entries' constraints) are compared after each such test with what the migrated
database had, and a test that changed them fails, by name, once."""

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


GUARDS = (
    "SELECT 'trigger', c.relname || '.' || t.tgname || ' ' || t.tgenabled::text "
    "FROM pg_trigger t "
    "JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal "
    "UNION ALL SELECT 'constraint', conrelid::regclass::text || '.' || conname "
    "FROM pg_constraint WHERE conrelid::regclass::text LIKE 'audit\\_%%'")
_guards: dict[str, set[tuple[str, str]]] = {}


def guards(alias: str) -> set[tuple[str, str]]:
    """The database's triggers (with their switch: O on, D off) and the audit tables'
    constraints."""
    with connections[alias].cursor() as cursor:
        cursor.execute(GUARDS)
        return set(cursor.fetchall())


def _named(found: set[tuple[str, str]]) -> set[str]:
    """The guards by name, whatever a trigger's switch."""
    return {name[:-2] if kind == "trigger" else name for kind, name in found}


def check_guards(alias: str, test: str) -> None:
    """Fail the test that turned a trigger off or dropped one of the guards the earlier
    tests had (once: what it left becomes what later tests are held to, so one culprit is
    named, not every test after it; the first test is held to every trigger on)."""
    now = guards(alias)
    before = _guards.get(alias, {(kind, name[:-2] + " O" if kind == "trigger" else name)
                                 for kind, name in now})
    _guards[alias] = now
    off = sorted(name for kind, name in now - before if name.endswith(" D"))
    gone = sorted(_named(before) - _named(now))
    if off or gone:
        raise AssertionError(
            f"{test} left the database's guards changed (a transactional test's schema "
            f"changes are not rolled back): turned off {off}, gone {gone}")


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
    for alias in aliases:
        check_guards(alias, self.id())
    return None


def install() -> None:
    TransactionTestCase._fixture_teardown = _emptied
