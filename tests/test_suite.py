"""The suite itself: it loads only the pytest plugins it uses (an installed package's plugin
costs seconds at every start), the models agree with their migrations, a browser test
leaves no database session open (PostgreSQL drops the test database only when none is left),
a transactional test leaves no row behind, and builds of the checkout's projects (which
setuptools makes in the checkout's own folders) take turns across the workers."""

import subprocess
import sys
import zipfile
from importlib.metadata import entry_points

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection, transaction

from audit.models import AuditEntry
from tests import emptied_tables
from tests.conftest import (
    BUILD_LOCK,
    ROOT,
    approved_with_client,
    building_in_checkout,
    built_if_in_checkout,
    eventually,
    minutes_long,
    postgresql_only,
    pytest_collection_modifyitems,
    sync_playwright,
)

# The entry-point plugins the suite uses, by module (see addopts in pyproject.toml).
USED = {"pytest_django.plugin", "pytest_timeout", "pytest_asyncio.plugin",
        "xdist.plugin", "_hypothesis_pytestplugin"}


def test_only_the_plugins_the_suite_uses_are_loaded(pytestconfig):
    loaded = {getattr(plugin, "__name__", None)
              for plugin in pytestconfig.pluginmanager.get_plugins()}
    installed = {point.value.split(":")[0] for point in entry_points(group="pytest11")}
    assert USED <= loaded, f"missing: {USED - loaded}"
    assert installed & loaded == USED, f"loaded by accident: {(installed & loaded) - USED}"


def test_collection_pauses_the_collector_and_the_order_comes_after_pytest_django(pytestconfig):
    # Two hookimpl markers on one function keep only the outer one: the collection's wrapper
    # was once a plain hook (never run) and the ordering hook lost its trylast.
    hook = pytestconfig.pluginmanager.hook
    ours = {impl.function.__name__: impl for name in ("pytest_collection",
                                                      "pytest_collection_modifyitems")
            for impl in getattr(hook, name).get_hookimpls()
            if impl.plugin_name.endswith("tests/conftest.py")}
    assert ours["pytest_collection"].wrapper
    assert ours["pytest_collection_modifyitems"].trylast


class Collected:
    """A collected test as the ordering hook reads it: its name and its `long` marker."""

    def __init__(self, name: str, minutes: int | None = None, marker=None) -> None:
        self.name = self.nodeid = name
        self.marker = marker or (None if minutes is None
                                 else pytest.mark.long(minutes=minutes).mark)

    def get_closest_marker(self, name: str):
        return self.marker if name == "long" else None


def test_the_modules_that_run_for_minutes_start_first_longest_first(request):
    items = [Collected("db"), Collected("install", 4), Collected("transactional"),
             Collected("cut network", 6), Collected("no database"), Collected("upgrade", 1)]
    pytest_collection_modifyitems(items)
    assert [item.name for item in items] == [
        "cut network", "install", "upgrade", "db", "transactional", "no database"]
    # and the run itself: in the whole suite the cut network's module comes first and every
    # quick test after the last long one
    minutes = [minutes_long(item) for item in request.session.items]
    assert minutes == sorted(minutes, reverse=True)
    # and xdist hands the modules out in that order (by default it sorts them by their
    # number of tests, most first: the long modules, of a few tests each, went out last)
    assert request.config.option.loadscopereorder is False


@pytest.mark.parametrize("marker", [pytest.mark.long, pytest.mark.long(minutes="4"),
                                    pytest.mark.long(minutes=0)])
def test_a_long_marker_without_its_minutes_stops_the_run_with_what_to_write(marker):
    with pytest.raises(pytest.UsageError, match=r"upgrade: write pytest.mark.long\(minutes=N\)"):
        pytest_collection_modifyitems([Collected("db"), Collected("upgrade", marker=marker.mark)])


def test_the_models_agree_with_their_migrations(db):
    try:
        call_command("makemigrations", "--check", "--dry-run", verbosity=0)
    except SystemExit as exit_:
        pytest.fail(f"models and migrations disagree (makemigrations --check exit {exit_.code})")


@postgresql_only  # sessions are PostgreSQL's: SQLite has none to leave
def test_a_browser_test_leaves_no_database_session_behind(transactional_db, browser_ready):
    def backend() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]

    mine = backend()
    with sync_playwright():
        beside = backend()  # the ORM beside Playwright's event loop: a session of its own
    assert beside != mine

    def sessions() -> set[int]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            return {pid for (pid,) in cursor.fetchall()}

    eventually(lambda: beside not in sessions(), timeout=60,
               message="the browser test's session is still connected")
    assert mine in sessions()


@postgresql_only  # the rows are deleted only on PostgreSQL (elsewhere Django flushes)
def test_a_transactional_test_ends_with_every_table_emptied_and_the_guards_back(
        transactional_db, people):
    """tests/emptied_tables.py: what a transactional test wrote is gone afterwards (a
    partitioned table, a guarded one, plain ones), the session's triggers (the audit trail's
    append-only guard among them) are back on, and the content types are kept."""
    agent, client = approved_with_client(people, connector={"type": "push"})
    report = {**{k: v for k, v in agent.active_version.spec.items() if k != "enforcement"},
              "running": True}
    assert client.put(f"/api/v1/agents/{agent.name}/observed-state", report,
                      format="json").status_code == 202
    tables = sorted(set(connection.introspection.django_table_names(
        only_existing=True, include_views=False)) - emptied_tables.KEPT)

    def rows() -> dict[str, int]:
        counts = {}
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
                counts[table] = cursor.fetchone()[0]
        return {table: n for table, n in counts.items() if n}

    assert {"reconciliation_observedstate", "audit_auditentry", "registry_agent",
            "auth_user"} <= set(rows())
    kinds = ContentType.objects.count()
    emptied_tables.empty_tables(connection.alias)
    assert rows() == {}
    assert ContentType.objects.count() == kinds > 0
    with connection.cursor() as cursor:  # the triggers' switch was this transaction's only
        cursor.execute("SHOW session_replication_role")
        assert cursor.fetchone()[0] == "origin"
    assert not AuditEntry.objects.exists()


@postgresql_only
def test_a_transactional_test_that_leaves_the_audit_guard_off_is_named(db):
    """Schema changes outlive a transactional test: the teardown holds every test to the
    triggers being on and the audit constraints in place, and names the one that changed
    them (once). (Here inside a transaction that is rolled back.)"""
    alias = connection.alias
    emptied_tables.check_guards(alias, "earlier")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
        with pytest.raises(AssertionError, match=r"the-culprit left .*turned off "
                           r"\['audit_auditentry.audit_entry_append_only D'\]"):
            emptied_tables.check_guards(alias, "the-culprit")
        emptied_tables.check_guards(alias, "a later test")  # named once
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE audit_auditentry DROP CONSTRAINT "
                           "audit_entry_columns_match_payload")
        with pytest.raises(AssertionError, match="other-culprit left .*gone "
                           r"\['audit_auditentry.audit_entry_columns_match_payload'\]"):
            emptied_tables.check_guards(alias, "other-culprit")
        transaction.set_rollback(True)
    emptied_tables.check_guards(alias, "after")  # all back: held to the real set again


def test_each_xdist_worker_has_a_redis_database_of_its_own_or_the_run_is_refused():
    from tests.embedded_redis_plugin import worker_redis_url

    assert worker_redis_url("redis://127.0.0.1:6379/9", "gw2") == "redis://127.0.0.1:6379/11"
    assert worker_redis_url("redis://127.0.0.1:6379", "gw1") == "redis://127.0.0.1:6379/1"
    assert worker_redis_url("redis://127.0.0.1:6379/9", None) == "redis://127.0.0.1:6379/9"
    # past the last database, or a URL whose database is not in its path: refused, not shared
    for url in ("redis://127.0.0.1:6379/9", "unix:///tmp/redis.sock?db=2",
                "redis://127.0.0.1:6379/9?db=3", "redis://127.0.0.1:6379/x"):
        with pytest.raises(pytest.UsageError):
            worker_redis_url(url, "gw7")


def take_build_lock(*, wait: bool) -> subprocess.CompletedProcess:
    """Another process (as another xdist worker is) taking the checkout's build lock."""
    flags = "fcntl.LOCK_EX" if wait else "fcntl.LOCK_EX | fcntl.LOCK_NB"
    return subprocess.run([sys.executable, "-c", "import fcntl, sys; "
                           f"fcntl.flock(open(sys.argv[1], 'w'), {flags})", str(BUILD_LOCK)],
                          capture_output=True, text=True, timeout=900)


def test_a_build_in_the_checkout_keeps_other_processes_builds_out_until_it_ends():
    with building_in_checkout():
        refused = take_build_lock(wait=False)
        assert refused.returncode != 0 and "BlockingIOError" in refused.stderr
    assert take_build_lock(wait=True).returncode == 0  # (another worker's build may be first)


def test_a_client_folder_is_installed_as_the_wheel_built_of_it_with_its_extras(tmp_path):
    requirement = built_if_in_checkout(f"{ROOT / 'clients' / 'python'}[mcp]", tmp_path)
    wheel, extras = requirement.split("[")
    assert extras == "mcp]" and zipfile.is_zipfile(wheel)
    assert "agentgov/client.py" in zipfile.ZipFile(wheel).namelist()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert built_if_in_checkout(str(outside), tmp_path) == str(outside)  # not the checkout's
    assert built_if_in_checkout("httpx>=0.27", tmp_path) == "httpx>=0.27"
