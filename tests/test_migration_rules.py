"""The migrations keep the rules docs/contributing.md sets for them: no live imports, no empty
merges, one number per migration in an app, every step reversible, and a squash replaces only
migrations the previous release had already shipped (so its installs mark the squash applied
and nothing runs twice)."""

import ast
import subprocess
from collections import Counter
from pathlib import Path

from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations.special import RunPython, RunSQL

from tests.conftest import ROOT
from tests.test_release_upgrade import PREVIOUS_RELEASE

OURS = sorted(p for p in ROOT.glob("*/migrations/0*.py"))
# Our code, which changes after a migration is written: the apps, and the client package.
LIVE = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} | {"agentgov"}


def imports_of(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def test_no_migration_imports_live_code():
    live = {f"{p.relative_to(ROOT)}: {name}" for p in OURS for name in imports_of(p)
            if name.split(".")[0] in LIVE}
    assert not live, "copy the code into the migration, or use apps.get_model"


def test_no_empty_merges_and_no_number_used_twice():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    ours = {(p.parent.parent.name, p.stem) for p in OURS}
    empty = sorted(f"{app}.{name}" for (app, name), migration in loader.disk_migrations.items()
                   if (app, name) in ours and not migration.operations)
    assert not empty, "renumber after the latest migration instead of merging"
    numbers = Counter((p.parent.parent.name, p.stem[:4]) for p in OURS)
    twice = [key for key, count in numbers.items() if count > 1]
    assert not twice


def test_every_migration_can_be_reversed():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    one_way = sorted(
        f"{app}.{name}: {type(operation).__name__}"
        for (app, name), migration in loader.disk_migrations.items()
        if (app, name) in {(p.parent.parent.name, p.stem) for p in OURS}
        for operation in migration.operations
        if isinstance(operation, RunPython | RunSQL) and not operation.reversible)
    assert not one_way, "give each RunPython a reverse (RunPython.noop when there is nothing)"


def test_a_squash_replaces_only_what_the_previous_release_shipped():
    shipped = set(subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", PREVIOUS_RELEASE], cwd=ROOT,
        capture_output=True, text=True, check=True).stdout.split())
    squashes = [m for m in MigrationLoader(None).disk_migrations.values() if m.replaces]
    assert squashes
    for squash in squashes:  # every install of the previous release has applied them all
        for app, name in squash.replaces:
            assert f"{app}/migrations/{name}.py" in shipped, (squash.name, name)
