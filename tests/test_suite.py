"""The suite itself: it loads only the pytest plugins it uses (an installed package's plugin
costs seconds at every start), and the models agree with their migrations."""

from importlib.metadata import entry_points

import pytest
from django.core.management import call_command

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
