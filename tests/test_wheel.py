"""The control plane as a company installs it: the built wheels (the server's and the client's,
which holds the audit formats) in a fresh virtual environment, run with the one `agentgov`
command from a folder that is not the checkout, in production mode. A cluster of a web
process, a worker and cron registers an agent, approves it, and reconciles it."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from config import embedded_redis
from tests.conftest import (
    REFUND_AGENT_YAML,
    ROOT,
    built_if_in_checkout,
    deployed_settings,
    eventually,
    fresh_venv,
)

# The module's wheels are built in the first test's setup (150 s on a slow 2-core machine
# under load, where building and migrating together passed the suite's 300 s per test).
pytestmark = [pytest.mark.long(minutes=4), pytest.mark.timeout(900)]


def interpreter(version: str) -> str | None:
    """A python{version} that runs (a pyenv shim for a version not selected does not)."""
    candidates = [shutil.which(f"python{version}"),
                  *map(str, sorted(Path("/root/.pyenv/versions").glob(f"{version}*/bin/python3")))]
    for path in filter(None, candidates):
        if subprocess.run([path, "-c", "import venv"], capture_output=True).returncode == 0:
            return path
    return None


OTHER_PYTHONS = [path for version in ("3.12", "3.13") if (path := interpreter(version))]


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=1200, **kwargs)
    assert result.returncode == 0, f"{argv}:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> list[Path]:
    dist = tmp_path_factory.mktemp("dist")
    found = sorted((Path(built_if_in_checkout(str(folder), dist))
                    for folder in (ROOT, ROOT / "clients" / "python")), key=lambda w: w.name)
    assert [w.name.split("-")[0] for w in found] == ["agent_governance", "agentgov_client"]
    return found


def test_every_app_of_the_project_is_packaged_in_the_wheel():
    """A new app left out of pyproject's package list installs a wheel that cannot start (the
    settings name an app the wheel lacks); caught here in a second, before any wheel is built."""
    import tomllib

    from django.apps import apps
    from setuptools import find_packages

    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packaged = set(find_packages(str(ROOT), include=found["packages"]["find"]["include"]))
    # An app that is a module of a package (config.startup) is packaged with that package.
    ours = {config.name if hasattr(config.module, "__path__") else config.module.__package__
            for config in apps.get_app_configs()
            if Path(config.path).resolve().parent == ROOT.resolve()}  # not .venv's
    assert {"registry", "gitsource", "siem"} <= ours  # the project's own apps are seen
    assert ours - packaged == set()


def install(wheels: list[Path], python: str, where: Path, *, compiled: bool) -> Path:
    """A fresh venv with only the two wheels (and what they depend on); returns its bin/.
    `compiled` for a venv whose processes start many times (see fresh_venv)."""
    return fresh_venv(where, *map(str, wheels), python=python, timeout=1200,
                      compiled=compiled).parent


@pytest.fixture
def production_env(tmp_path, transactional_db):
    """Settings for an installed cluster: its own fresh database, the test Redis, secrets,
    a signing key and a witness, DEBUG off."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("DJANGO", "PYTHON", "DATABASE", "VIRTUAL_ENV"))}
    env.update(deployed_settings(tmp_path))
    env.update(SECURE_SSL_REDIRECT="false", VAR_DIR=str(tmp_path / "var"),
               AUDIT_WITNESSES=f"file://{tmp_path / 'witness'}", REDIS_URL=settings.REDIS_URL,
               RECONCILE_VERIFY_DELAY_SECONDS="1")
    if connection.vendor != "postgresql":
        yield env  # SQLite under VAR_DIR
        return
    cfg = connection.settings_dict
    name = f"agentgov_wheel_{os.getpid()}"
    admin = (f"host={cfg.get('HOST') or '127.0.0.1'} port={cfg.get('PORT') or 5432} "
             f"user={cfg.get('USER') or 'postgres'} dbname=postgres")
    with psycopg.connect(admin, autocommit=True) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        server.execute(f'CREATE DATABASE "{name}"')
    env["DATABASE_URL"] = (f"postgres://{cfg.get('USER') or 'postgres'}@"
                           f"{cfg.get('HOST') or '127.0.0.1'}:{cfg.get('PORT') or 5432}/{name}")
    yield env
    with psycopg.connect(admin, autocommit=True) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def http(method: str, url: str, body: bytes | None = None, **headers: str):
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


class Cluster:
    """agentgov serve, worker and cron started from an installed venv, outside the checkout."""

    def __init__(self, bin_dir: Path, env: dict[str, str], cwd: Path) -> None:
        self.bin, self.env, self.cwd = bin_dir, env, cwd
        self.processes: list[subprocess.Popen] = []
        self.port = embedded_redis.free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def command(self, *argv: str) -> str:
        return run([str(self.bin / "agentgov"), *argv], env=self.env, cwd=self.cwd).stdout

    def start(self, *argv: str) -> None:
        log = open(self.cwd / f"{argv[0]}.log", "w")  # noqa: SIM115
        self.processes.append(subprocess.Popen(
            [str(self.bin / "agentgov"), *argv], env=self.env, cwd=self.cwd, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True))

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for process in self.processes:
            try:
                process.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def token(cluster: Cluster, user: str, role: str) -> str:
    cluster.command("manage", "grant_role", user, role, "--create")
    return cluster.command("manage", "api_token", user).strip().splitlines()[-1]


def test_the_installed_wheel_runs_a_cluster(wheels, production_env, tmp_path):
    bin_dir = install(wheels, sys.executable, tmp_path / "venv", compiled=True)
    site = tmp_path / "site"
    site.mkdir()
    cluster = Cluster(bin_dir, production_env, site)
    cluster.command("migrate")
    cluster.command("check")  # deploy checks: exits non-zero on any error
    try:
        cluster.start("serve", "--port", str(cluster.port))
        cluster.start("worker")
        cluster.start("cron")
        eventually(lambda: embedded_redis.port_answers("127.0.0.1", cluster.port),
                   timeout=120, message="agentgov serve did not listen")
        assert http("GET", f"{cluster.url}/readyz")[0] == 200
        status, page = http("GET", f"{cluster.url}/login/")
        assert status == 200 and b"password" in page  # the console's templates ship
        status, css = http("GET", f"{cluster.url}/static/css/site.css")
        assert status == 200 and css  # and its static files

        alice, bob = token(cluster, "alice", "owner"), token(cluster, "bob", "approver")
        status, body = http("POST", f"{cluster.url}/api/v1/manifests",
                            REFUND_AGENT_YAML.encode(), Authorization=f"Token {alice}",
                            **{"Content-Type": "application/yaml"})
        assert status in (200, 201), body
        (proposal,) = [r["proposal"] for r in json.loads(body)["results"]]
        status, body = http("POST", f"{cluster.url}/api/v1/proposals/{proposal}/approve",
                            json.dumps({"comment": "ok"}).encode(),
                            Authorization=f"Token {bob}", **{"Content-Type": "application/json"})
        assert status == 200, body

        def ready() -> bool:
            _, agent = http("GET", f"{cluster.url}/api/v1/agents/refund-agent",
                            Authorization=f"Token {alice}")
            conditions = {c["type"]: c["status"] for c in json.loads(agent)["conditions"]}
            return conditions.get("Ready") == "True"

        eventually(ready, timeout=180, interval=1,
                   message="the installed worker never reconciled the approved agent")
    finally:
        cluster.stop()


@pytest.mark.parametrize("python", OTHER_PYTHONS, ids=lambda p: Path(p).name)
def test_the_wheel_installs_and_checks_on_other_pythons(wheels, production_env, tmp_path,
                                                          python):
    bin_dir = install(wheels, python, tmp_path / "venv", compiled=False)  # three starts
    site = tmp_path / "site"
    site.mkdir()
    cluster = Cluster(bin_dir, production_env, site)
    cluster.command("migrate")
    cluster.command("check")
    try:
        cluster.start("serve", "--port", str(cluster.port))
        eventually(lambda: embedded_redis.port_answers("127.0.0.1", cluster.port),
                   timeout=120, message="agentgov serve did not listen")
        assert http("GET", f"{cluster.url}/readyz")[0] == 200
    finally:
        cluster.stop()
