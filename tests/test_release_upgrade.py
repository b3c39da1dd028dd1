"""Upgrading from the previous release with work in flight, as the operator guide says:

1. the previous release migrates a fresh PostgreSQL database and serves it (a web process and
   two workers), with agents approved and reconciled;
2. its agents drift, and while its workers are correcting them the new release's `migrate`
   runs; the old web process keeps answering and the old workers keep correcting, on the new
   schema;
3. the processes are swapped (new workers, cron and web started, then the old ones stopped
   with SIGTERM, which lets a job in hand finish) while a further drift is being corrected;
4. every agent converges, each correction was applied exactly once (the platform's own count,
   the correction rows and the audit trail's `correction.applied` entries agree), and, once
   `audit publish` has handed the witness the checkpoint the previous release signed (it had
   no witnesses), `audit verify` of the new release passes over the trail both wrote.

The previous release: there are no tags, so it is the last commit on main before the
session whose merges made the current release (the wheel, replicas, Sentinel, the cron leader),
PREVIOUS_RELEASE below. It is six migrations behind (reconciliation 0026-0028, registry
0014-0016), so the upgrade really changes the schema under the running processes. Its
dependencies are a subset of today's, so it runs from `git archive` of that commit with this
virtual environment's interpreter and packages (its tree first on the path): nothing is
installed.
"""

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from io import BytesIO
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from audit.verify import PUBLISH_GRACE
from config import embedded_redis
from tests.conftest import BAD_DEPLOYMENT, REFUND_AGENT_YAML, ROOT, eventually

PREVIOUS_RELEASE = "87149e4"  # main on 2026-12-01, before the "ship it" session's merges
AGENTS = [f"upgrade-{index}" for index in range(4)]
CHANGES_PER_DRIFT = 3  # BAD_DEPLOYMENT: a tool added, CRM access granted, the $500 rule dropped
ROUNDS = 3

pytestmark = [
    pytest.mark.long(minutes=1),
    pytest.mark.skipif(connection.vendor != "postgresql",
                       reason="upgrades are supported on PostgreSQL (migrating while old "
                              "processes serve needs its transactional DDL and row locks); "
                              "set DATABASE_URL to run it"),
    pytest.mark.timeout(1500),
]

# Run by either release with `python -c`: the names used exist in both.
SEED = """
import json, os, django
django.setup()
import yaml
from registry import actions
from registry.choices import Role, VersionSource
from registry.manifest import validate_manifest

def person(name, role):
    user, _ = actions.create_person(name, actor="system:upgrade-test",
                                    password="upgrade-Pass-7391")
    actions.grant_role(user, role, actor="system:upgrade-test")
    return user

alice, bob = person("alice", Role.OWNER), person("bob", Role.APPROVER)
dana = person("dana", Role.COMPLIANCE)
for name in json.loads(os.environ["AGENTS"]):
    document = yaml.safe_load(os.environ["MANIFEST"])
    document["metadata"]["name"] = name
    document["spec"]["enforcement"] = {"default": "correct"}
    (outcome,) = actions.apply_manifests([validate_manifest(document)], actor=alice,
                                         source=VersionSource.YAML)
    actions.approve_proposal(outcome.version.pk, actor=bob)
_, key = actions.issue_api_token(dana, actor=dana)
print(key)
"""

DRIFT = """
import json, os, django
django.setup()
from registry.models import Agent
from sandbox import actions
for agent in Agent.objects.filter(name__in=json.loads(os.environ["AGENTS"])).order_by("name"):
    actions.sandbox_deploy(agent, actor="system:upgrade-test",
                           changes=json.loads(os.environ["CHANGES"]), reason=os.environ["REASON"])
"""


class Release:
    """One release's code: its tree, and its processes started against the upgrade database."""

    def __init__(self, name: str, tree: Path, env: dict[str, str], logs: Path) -> None:
        self.name, self.tree, self.logs = name, tree, logs
        self.env = {**env, "PYTHONPATH": str(tree)}
        self.processes: list[subprocess.Popen] = []

    def run(self, *argv: str, **extra: str) -> str:
        result = subprocess.run([sys.executable, *argv], cwd=self.tree,
                                env={**self.env, **extra}, capture_output=True, text=True,
                                timeout=900)
        assert result.returncode == 0, (f"{self.name}: {argv[:2]}:\n{result.stdout[-2000:]}\n"
                                        f"{result.stderr[-4000:]}")
        return result.stdout

    def start(self, label: str, *argv: str) -> subprocess.Popen:
        log = open(self.logs / f"{self.name}-{label}.log", "w")  # noqa: SIM115
        process = subprocess.Popen([sys.executable, *argv], cwd=self.tree, env=self.env,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append(process)
        return process

    def web(self) -> str:
        port = embedded_redis.free_port()
        process = self.start("web", "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                             "config.asgi:application")
        eventually(lambda: process.poll() is not None
                   or embedded_redis.port_answers("127.0.0.1", port),
                   timeout=180, message=f"{self.name}'s web process did not listen")
        assert process.poll() is None, self.tail("web")
        return f"http://127.0.0.1:{port}"

    def worker(self, label: str) -> subprocess.Popen:
        return self.start(label, "manage.py", "rqworker", "reconcile", "ingest", "default",
                          "--with-scheduler")

    def stop(self) -> None:
        """SIGTERM, as an operator's service manager stops them: a worker finishes the job in
        hand (RQ's warm shutdown), the web process its requests."""
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        for process in self.processes:
            try:
                process.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes = []

    def tail(self, label: str) -> str:
        path = self.logs / f"{self.name}-{label}.log"
        if not path.exists():
            return "(no log)"
        lines = [line for line in path.read_text(errors="replace").splitlines()
                 if "cleaning registries" not in line]  # RQ says so every few seconds
        return "\n".join(lines[-40:])

    def drift(self, reason: str) -> None:
        self.run("-c", DRIFT, AGENTS=json.dumps(AGENTS), CHANGES=json.dumps(BAD_DEPLOYMENT),
                 REASON=reason)


def previous_tree(where: Path) -> Path:
    """The previous release's files, as `git archive` gives them (no checkout of this tree)."""
    archive = subprocess.run(["git", "archive", "--format=tar", PREVIOUS_RELEASE], cwd=ROOT,
                             capture_output=True, check=True, timeout=300).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(where, filter="data")
    return where


@pytest.fixture
def upgrade_database():
    """A fresh PostgreSQL database of its own (the test database is already at the latest
    migration); dropped afterwards."""
    cfg = connection.settings_dict
    host, port = cfg.get("HOST") or "127.0.0.1", cfg.get("PORT") or 5432
    user = cfg.get("USER") or "postgres"
    name = f"{cfg['NAME']}_upgrade_{os.getpid()}"[:63]
    admin = f"host={host} port={port} user={user} dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        server.execute(f'CREATE DATABASE "{name}"')
    yield f"postgres://{user}@{host}:{port}/{name}"
    with psycopg.connect(admin, autocommit=True) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def counts(url: str) -> dict[str, dict[str, int]]:
    """Per agent: corrections the platform applied, correction rows (and applied ones), and
    `correction.applied` audit entries; and the agents in policy with no drift left open."""
    with psycopg.connect(url.replace("postgres://", "postgresql://")) as db:
        def per_agent(sql: str) -> dict[str, int]:
            return dict(db.execute(sql).fetchall())

        return {
            "platform": per_agent("SELECT a.name, s.apply_count FROM "
                                  "reconciliation_sandboxagent s JOIN registry_agent a "
                                  "ON a.id = s.agent_id"),
            "rows": per_agent("SELECT a.name, count(*) FROM reconciliation_correction c "
                              "JOIN registry_agent a ON a.id = c.agent_id GROUP BY a.name"),
            "applied_rows": per_agent("SELECT a.name, count(*) FROM reconciliation_correction c"
                                      " JOIN registry_agent a ON a.id = c.agent_id WHERE "
                                      "c.result IN ('applied', 'verified') GROUP BY a.name"),
            "audit": per_agent("SELECT agent, count(*) FROM audit_auditentry WHERE action = "
                               "'correction.applied' GROUP BY agent"),
            "settled": per_agent(
                "SELECT a.name, 1 FROM registry_agent a JOIN reconciliation_agentstatus s ON "
                "s.agent_id = a.id WHERE s.health = 'in_policy' AND NOT EXISTS (SELECT 1 FROM "
                "reconciliation_finding f WHERE f.agent_id = a.id AND f.status <> 'corrected')"),
        }


def checkpoint_rows(url: str) -> list[tuple]:
    """Every signed checkpoint: its size, when, by which algorithm (for failure messages)."""
    with psycopg.connect(url.replace("postgres://", "postgresql://")) as db:
        return [(seq, at.isoformat(), algorithm) for seq, at, algorithm in db.execute(
            "SELECT seq, at, algorithm FROM audit_auditcheckpoint ORDER BY seq").fetchall()]


def converged(url: str, rounds: int) -> bool:
    """Every agent back in policy with all of `rounds` drifts corrected and on record."""
    seen = counts(url)
    want = CHANGES_PER_DRIFT * rounds
    return all(seen["platform"].get(name) == want and seen["audit"].get(name, 0) == want
               and seen["settled"].get(name) for name in AGENTS)


def ask_reconcile(base: str, key: str) -> list[int]:
    """A manual pass for every agent through a web process's API: the statuses it answered."""
    statuses = []
    for name in AGENTS:
        request = urllib.request.Request(f"{base}/api/v1/agents/{name}/reconcile", method="POST",
                                         headers={"Authorization": f"Token {key}"})
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                statuses.append(answer.status)
        except urllib.error.HTTPError as error:
            statuses.append(error.code)
    return statuses


def test_upgrading_with_workers_running_loses_and_doubles_no_correction(
        upgrade_database, tmp_path, redis_client):
    logs = tmp_path / "logs"
    logs.mkdir()
    # Both releases share the database, the Redis, the keys under VAR_DIR and the settings;
    # the audit trail's signer memory and witness are the development defaults under VAR_DIR.
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("DJANGO", "PYTHON", "DATABASE", "VIRTUAL_ENV", "AUDIT_"))}
    env.update(DATABASE_URL=upgrade_database, REDIS_URL=settings.REDIS_URL,
               VAR_DIR=str(tmp_path / "var"), DJANGO_SETTINGS_MODULE="config.settings",
               PYTHONUNBUFFERED="1", RECONCILE_VERIFY_DELAY_SECONDS="1",
               BREAKER_SHARE_PERCENT="100", DEMO_SIMULATOR_SECONDS="0")
    old = Release("previous", previous_tree(tmp_path / "previous"), env, logs)
    # The new cron signs the head on its first run, but an old worker still running may take
    # that job and be stopped before it is done (seen: the next run, five minutes later,
    # signed it): the new release checkpoints every minute here, so the wait is a minute at
    # most, not five.
    new = Release("current", ROOT, {**env, "AUDIT_CHECKPOINT_MINUTES": "1"}, logs)
    assert old.run("-c", "import config; print(config.__file__)").startswith(str(old.tree))

    def why() -> str:
        return (json.dumps(counts(upgrade_database)) + "\n"
                + "\n".join(f"--- {release.name} {label}:\n{release.tail(label)}"
                            for release in (old, new)
                            for label in ("worker-1", "worker-2", "web")))

    try:
        # 1. The previous release, installed and running.
        old.run("manage.py", "migrate", "--noinput", "-v", "0")
        key = old.run("-c", SEED, AGENTS=json.dumps(AGENTS),
                      MANIFEST=REFUND_AGENT_YAML).strip().splitlines()[-1]
        # A checkpoint the previous release signed (it had no witness): verify must still
        # accept the trail it starts.
        signed_before = int(old.run(
            "-c", "import django; django.setup(); from audit.actions import checkpoint_head;"
                  " made = checkpoint_head(); assert made is not None; print(made.seq)",
        ).strip().splitlines()[-1])
        old.worker("worker-1"), old.worker("worker-2")
        old_web = old.web()
        eventually(lambda: converged(upgrade_database, 0), timeout=300, interval=1,
                   message=why)

        # 2. Drift; the new release migrates while the old workers correct it and the old
        # web process keeps answering.
        old.drift("round 1: before the upgrade")
        migrating = subprocess.Popen([sys.executable, "manage.py", "migrate", "--noinput"],
                                     cwd=ROOT, env=new.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        answered: list[int] = []
        while migrating.poll() is None:
            answered += ask_reconcile(old_web, key)
        output = migrating.stdout.read()
        assert migrating.returncode == 0, output
        assert "Applying reconciliation.0028_lifecycle_shadow_expiry... OK" in output, output
        assert answered and set(answered) == {202}, answered  # never a 500 while migrating
        eventually(lambda: converged(upgrade_database, 1), timeout=300, interval=1,
                   message=why)
        # The old release on the new schema: it still drifts, corrects and answers.
        old.drift("round 2: old code on the new schema")
        assert set(ask_reconcile(old_web, key)) == {202}
        eventually(lambda: converged(upgrade_database, 2), timeout=300, interval=1,
                   message=why)

        # 3. The swap, with a drift in flight: new processes first, then the old ones stop.
        old.drift("round 3: across the swap")
        new.worker("worker-1"), new.worker("worker-2")
        new.start("cron", "manage.py", "cron")
        new_web = new.web()
        old.stop()
        assert set(ask_reconcile(new_web, key)) == {202}
        eventually(lambda: converged(upgrade_database, ROUNDS), timeout=300, interval=1,
                   message=why)
        # The new release's cron signs the head on its first run (a job its workers take,
        # which on a loaded machine may come after the last correction).
        eventually(lambda: any(seq > signed_before
                               for seq, _, _ in checkpoint_rows(upgrade_database)),
                   timeout=300, interval=1, message=why)
    finally:
        old.stop()
        new.stop()

    # 4. Nothing lost, nothing applied twice, and the trail both releases wrote verifies.
    seen = counts(upgrade_database)
    want = {name: CHANGES_PER_DRIFT * ROUNDS for name in AGENTS}
    assert seen["platform"] == want, seen  # the platform saw each change once
    assert seen["applied_rows"] == want and seen["rows"] == want, seen
    assert seen["audit"] == want, seen
    def audit(verb: str) -> tuple[int, dict]:
        done = subprocess.run([sys.executable, "manage.py", "audit", verb], cwd=ROOT,
                              env=new.env, capture_output=True, text=True, timeout=600)
        lines = done.stdout.strip().splitlines()
        assert lines, done.stderr[-4000:]
        return done.returncode, json.loads(lines[-1])

    # The previous release's checkpoint never reached a witness (it had none): verify says so
    # until the operator hands the witnesses what was signed before them. What verify must say
    # is read from the witness itself (the new release's default directory under VAR_DIR), so
    # the check holds whatever reached it, and a failure shows what the witness held.
    # Verify allows a checkpoint PUBLISH_GRACE to reach the witnesses: on a fast machine the
    # whole upgrade takes less than that, so wait until the old one is past it.
    signed_at = next(datetime.fromisoformat(at) for seq, at, _ in
                     checkpoint_rows(upgrade_database) if seq == signed_before)
    eventually(lambda: datetime.now(UTC) > signed_at + PUBLISH_GRACE + timedelta(seconds=1),
               timeout=PUBLISH_GRACE.total_seconds() + 30, interval=1)
    witness = tmp_path / "var" / "audit-witness"
    held = sorted(path.name for path in witness.glob("checkpoint-*.json"))
    status, report = audit("verify")
    seen = {"report": report, "witness": held, "signed_before": signed_before,
            "checkpoints": checkpoint_rows(upgrade_database)}
    if f"checkpoint-{signed_before:012d}.json" in held:
        assert status == 0 and report["ok"] is True, seen
    else:
        assert (status, report["reason"]) == (1, "witness-missing"), seen
    status, report = audit("publish")
    assert status == 0 and report["ok"] is True and report["published"] >= 2, report
    status, report = audit("verify")
    assert status == 0 and report["ok"] is True and report["count"] > 0, report
