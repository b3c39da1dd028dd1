"""The suite itself: it loads only the pytest plugins it uses (an installed package's plugin
costs seconds at every start), the models agree with their migrations, and a browser test
leaves no database session open (PostgreSQL drops the test database only when none is left)."""

from importlib.metadata import entry_points

import pytest
from django.core.management import call_command
from django.db import connection

from tests.conftest import eventually, postgresql_only, sync_playwright

# The entry-point plugins the suite uses, by module (see addopts in pyproject.toml).
USED = {"pytest_django.plugin", "pytest_timeout", "pytest_asyncio.plugin",
        "_hypothesis_pytestplugin"}


def test_only_the_plugins_the_suite_uses_are_loaded(pytestconfig):
    loaded = {getattr(plugin, "__name__", None)
              for plugin in pytestconfig.pluginmanager.get_plugins()}
    installed = {point.value.split(":")[0] for point in entry_points(group="pytest11")}
    assert USED <= loaded, f"missing: {USED - loaded}"
    assert installed & loaded == USED, f"loaded by accident: {(installed & loaded) - USED}"


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
