"""Backup and restore as the operator guide says: `pg_dump -Fc`, `pg_restore` into a new
database, then `manage.py audit verify` on the restored copy with the same keys, signer memory
and witness. A current backup verifies whole; restoring an older one (the trail cut back to the
backup) is caught by the signer's memory and the witness, not silently accepted."""

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from audit.actions import checkpoint_head
from reconciliation import actions as reconciliation_actions
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, ROOT, approved_agent, child_env

pytestmark = pytest.mark.django_db(transaction=True)


def pg_tool(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    assert found, f"{name} is missing (Debian's postgresql-client ships it)"
    return str(found[-1])


@pytest.fixture
def databases():
    """The test database's connection facts, and restore targets dropped afterwards."""
    if connection.vendor != "postgresql":
        pytest.skip("pg_dump and pg_restore back up PostgreSQL: run with DATABASE_URL on it")
    cfg = connection.settings_dict
    facts = {"host": cfg.get("HOST") or "127.0.0.1", "port": str(cfg.get("PORT") or 5432),
             "user": cfg.get("USER") or "postgres", "name": cfg["NAME"]}
    made: list[str] = []
    admin = f"host={facts['host']} port={facts['port']} user={facts['user']} dbname=postgres"

    def restore(dump: Path) -> str:
        name = f"agentgov_restore_{os.getpid()}_{len(made)}"
        with psycopg.connect(admin, autocommit=True) as server:
            server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            server.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        result = subprocess.run([pg_tool("pg_restore"), "-h", facts["host"], "-p", facts["port"],
                                 "-U", facts["user"], "-d", name, "--no-owner", str(dump)],
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        return f"postgres://{facts['user']}@{facts['host']}:{facts['port']}/{name}"

    def dump(path: Path) -> Path:
        connection.close()  # everything committed is in the dump; nothing half-done
        result = subprocess.run([pg_tool("pg_dump"), "-Fc", "-h", facts["host"], "-p",
                                 facts["port"], "-U", facts["user"], "-f", str(path),
                                 facts["name"]], capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        return path

    yield dump, restore
    with psycopg.connect(admin, autocommit=True) as server:
        for name in made:
            server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def verify(url: str, witness: Path) -> tuple[int, dict]:
    result = subprocess.run([sys.executable, "manage.py", "audit", "verify"], cwd=ROOT,
                            env=child_env(DATABASE_URL=url, AUDIT_WITNESSES=f"file://{witness}"),
                            capture_output=True, text=True, timeout=600)
    report = json.loads(result.stdout.strip().splitlines()[-1]) if result.stdout.strip() else {}
    return result.returncode, report


def test_a_restored_backup_verifies_and_an_old_one_is_caught(people, databases, tmp_path,
                                                              settings):
    dump, restore = databases
    witness = tmp_path / "witness"
    settings.AUDIT_WITNESSES = [f"file://{witness}"]
    agent = approved_agent(people, "backed-up")
    assert checkpoint_head() is not None
    old_backup = dump(tmp_path / "old.dump")

    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="after the first backup")
    reconciliation_actions.reconcile_agent(agent.pk, trigger="manual")
    assert checkpoint_head() is not None  # signed past the old backup: the witness has it
    current_backup = dump(tmp_path / "current.dump")

    status, report = verify(restore(current_backup), witness)
    assert (status, report.get("ok")) == (0, True), report
    assert report["count"] > 0 and report["checkpoints"] >= 2

    status, report = verify(restore(old_backup), witness)
    assert status != 0 and report.get("ok") is False, report
    assert report["reason"] in ("truncated", "witness-missing", "rehashed"), report
