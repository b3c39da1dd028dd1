"""Shared personas and helpers: alice the owner, bob and carol the approvers, dana from
compliance, and an admin, all made through the product's own actions."""

import contextlib
import fcntl
import gc
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, connections
from rest_framework.test import APIClient

from config import embedded_redis, startup
from registry import actions
from registry.choices import Role
from runtime import windows
from tests import emptied_tables
from tests.snapshot_redis import SnapshotRedis

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct-horse-battery-staple"


def pytest_configure(config):
    emptied_tables.install()  # transactional tests end by deleting rows, not by TRUNCATE


def minutes_long(item: pytest.Item) -> int:
    """The minutes a `long` module says it runs for; 0 for every other test."""
    marker = item.get_closest_marker("long")
    if marker is None:
        return 0
    minutes = marker.kwargs.get("minutes", marker.args[0] if marker.args else None)
    if not isinstance(minutes, int) or isinstance(minutes, bool) or minutes < 1:
        raise pytest.UsageError(f"{item.nodeid}: write pytest.mark.long(minutes=N), N the "
                                f"whole minutes the module runs for, not {marker}")
    return minutes


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    # Collecting imports every test module and the agent frameworks: objects kept for the
    # whole run, made without the cyclic collector walking them over and over, then kept out
    # of its reach (as a product process's start-up: config/startup.py).
    startup.pause_collector()
    try:
        return (yield)
    finally:
        startup.resume_collector()


@pytest.hookimpl(trylast=True)  # after pytest-django's order: database, transactional, neither
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The modules that run for minutes (installs, clusters, cut networks) start first, longest
    # first: the xdist workers take modules in this order, and one started last ends the run
    # alone. The sort is stable, so every other test keeps pytest-django's order.
    items.sort(key=lambda item: -minutes_long(item))


@dataclass
class People:
    """The personas of the tests."""

    alice: User
    bob: User
    carol: User
    dana: User
    admin: User


def make_person(username: str, role: Role) -> User:
    user, _ = actions.create_person(username, actor="system:test", password=PASSWORD)
    actions.grant_role(user, role, actor="system:test")
    return user


@pytest.fixture
def people(db) -> People:
    return People(
        alice=make_person("alice", Role.OWNER),
        bob=make_person("bob", Role.APPROVER),
        carol=make_person("carol", Role.APPROVER),
        dana=make_person("dana", Role.COMPLIANCE),
        admin=make_person("admin", Role.ADMIN),
    )


@pytest.fixture
def api_as():
    """An API client authenticated with a real token for the given person."""

    def make(user: User) -> APIClient:
        _, key = actions.issue_api_token(user, actor="system:test")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return client

    return make


@pytest.fixture
def redis_client() -> redis.Redis:
    """The test Redis, emptied before the test, and this process as one that has not looked
    at it yet (an earlier test's agent may have had an id this test's agent has: on SQLite
    ids are used again, and its windows' fill would be trusted until a count saw the loss)."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.flushdb()
    windows.forget_confirmed()
    yield client
    client.close()


@pytest.fixture
def snapshot_redis(tmp_path, settings) -> SnapshotRedis:
    """A redis-server of the test's own that keeps only what it is told to save, as the
    windows' and the ingest queue's Redis (tests/snapshot_redis.py)."""
    server = SnapshotRedis(tmp_path)
    settings.REDIS_URL = server.url  # the windows, and the queue broken rules go to
    windows.forget_confirmed()
    yield server
    windows.forget_confirmed()
    server.stop()


def assert_session_durable() -> None:
    """The session is outside any transaction, and a commit that did not wait for the disk
    (the outbox's, `SET LOCAL synchronous_commit TO OFF`) was its own transaction's alone."""
    assert not connection.in_atomic_block
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone()[0] == "on"
            assert cursor.connection.info.transaction_status.name == "IDLE"


# Tests of PostgreSQL's own machinery (partitions, advisory locks, plan shapes) say so; on the
# embedded SQLite default they are skipped with this reason instead of failing.
postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql",
                                     reason="needs PostgreSQL (set DATABASE_URL)")


def waits_on_a_lock(*, besides: int | None = None) -> bool:
    """Another session of this test database (PostgreSQL) waits on a lock; `besides`, a
    backend's pid not to count (the session holding the lock, when it could wait too)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                       " AND pid <> pg_backend_pid() AND pid <> %s AND wait_event_type = 'Lock'",
                       [besides or 0])
        return cursor.fetchone()[0] > 0


def database_url() -> str:
    """A URL for the test database, for processes the test starts."""
    cfg = connection.settings_dict
    if connection.vendor == "postgresql":
        host = cfg.get("HOST") or "127.0.0.1"
        port = cfg.get("PORT") or 5432
        user = cfg.get("USER") or "postgres"
        return f"postgres://{user}@{host}:{port}/{cfg['NAME']}"
    return f"sqlite:///{cfg['NAME']}"


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a process the test starts: same test database and Redis."""
    env = dict(os.environ)
    env.update(DATABASE_URL=database_url(), REDIS_URL=settings.REDIS_URL,
               DJANGO_SETTINGS_MODULE="tests.process_settings", PYTHONPATH=str(ROOT))
    env.update(extra)
    return env


def deployed_settings(directory: Path) -> dict[str, str]:
    """What a process needs to start as deployed (DEBUG off): secrets, an audit signing key
    written under `directory`, the test host allowed. A test adds what its set-up needs on
    top (SECURE_SSL_REDIRECT off without a TLS proxy in front)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = directory / "audit-key.pem"
    key.write_bytes(ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return {"DEBUG": "false", "SECRET_KEY": DEPLOYED_SECRET,
            "AUDIT_SIGNING_KEY": DEPLOYED_SECRET[::-1], "AUDIT_PRIVATE_KEY_FILE": str(key),
            "ALLOWED_HOSTS": "127.0.0.1"}


DEPLOYED_SECRET = "x7Kq2mP9vR4tW8yB3nF6hJ1cL5dG0sZ-aE"  # 34 characters, many different


@dataclass
class LiveServer:
    """A real daphne process serving the ASGI app."""

    url: str
    process: subprocess.Popen


def start_daphne(**env: str) -> LiveServer:
    """Start a web process (daphne, through `agentgov serve`) on the test database and Redis
    (with extra environment)."""
    port = embedded_redis.free_port()
    # Its output goes to a file, read back only if it fails to start: a pipe nobody reads
    # would stop the server the day it logged more than the pipe holds.
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(
            # The product's own command (`agentgov serve`), as an operator starts it.
            [sys.executable, "-m", "config.cli", "serve", "--port", str(port)],
            cwd=ROOT, env=child_env(**env), stdout=subprocess.DEVNULL, stderr=output,
        )
        deadline = time.monotonic() + 90  # a loaded CI machine starts daphne slowly
        while not embedded_redis.port_answers("127.0.0.1", port):
            if process.poll() is not None or time.monotonic() > deadline:
                output.seek(0)
                raise RuntimeError(output.read().decode(errors="replace")[-4000:]
                                   or "daphne died")
            time.sleep(0.1)
    return LiveServer(f"http://127.0.0.1:{port}", process)


def stop_daphne(server: LiveServer) -> None:
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()


@contextlib.contextmanager
def sync_playwright():
    """Playwright's sync API for a browser test. Beside Playwright's event loop, Django keeps
    the ORM calls the test makes on connections of their own (not the test's), which nothing
    else closes: a whole run would end with sessions PostgreSQL will not drop the test
    database under. They are closed as the block ends."""
    from playwright.sync_api import sync_playwright as playwright_api  # browser tests only

    outside = {id(each) for each in connections.all(initialized_only=True)}
    with playwright_api() as playwright:
        try:
            yield playwright
        finally:
            for each in connections.all(initialized_only=True):
                if id(each) not in outside and each.connection is not None:
                    each.close()


@pytest.fixture
def browser_ready(monkeypatch):
    """Playwright's sync API runs an event loop in this thread; Django's ORM calls the test
    makes beside it are safe here (one thread, no concurrent use)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def live_server_process(transactional_db):
    server = start_daphne()
    yield server
    stop_daphne(server)


@pytest.fixture(scope="module")
def module_server(django_db_setup, tmp_path_factory):
    """One daphne for the tests of a module that ask for `shared_server_process`: starting and
    stopping one costs ~3-4 s, and a hundred tests asked for one each. The environment the
    autouse fixtures give a test's processes is given here (no witness, a signer memory of the
    server's own, emptied before each test by shared_server_process)."""
    memory = tmp_path_factory.mktemp("shared-server") / "signed-head.json"
    server = start_daphne(AUDIT_WITNESSES="none", AUDIT_SIGNED_HEAD_FILE=str(memory))
    yield server, memory
    stop_daphne(server)


@pytest.fixture
def shared_server_process(module_server, transactional_db) -> LiveServer:
    """The module's daphne, for a test that gives it no environment of its own (for one that
    does, `live_server_process`). It keeps nothing of an earlier test that a test could see:
    the database is emptied between tests and ids are never reused, and its memory of the last
    signed audit head goes with the trail it was of."""
    server, memory = module_server
    assert server.process.poll() is None, "the module's daphne has died"
    for path in (memory, memory.with_name(memory.name + ".refused")):
        path.unlink(missing_ok=True)
    return server


@pytest.fixture
def hosted_cluster(transactional_db, settings):
    """Hosts of their own on this machine (Linux network namespaces, see tests/netns.py):
    Redis on a store host, PostgreSQL through a relay, and web processes and workers the test
    starts with `hosted_cluster.web(...)` and `.worker(...)`. This process talks to the same
    stores. Every process, namespace and link is removed however the test ends. Without
    PostgreSQL or without root the test is skipped with the reason (CI has both); as root,
    namespaces that cannot be made fail the test."""
    from channels.layers import channel_layers

    from tests.netns import HostedCluster, NetworkUnavailable

    if connection.vendor != "postgresql":
        pytest.skip("the cross-host tests need PostgreSQL (DATABASE_URL): hosts reach the "
                    "database over the network")
    if os.geteuid() != 0:
        pytest.skip("the cross-host tests make Linux network namespaces, which needs root")
    try:
        cluster = HostedCluster(database=connection.settings_dict, root=ROOT,
                                logs=Path(settings.VAR_DIR))
    except NetworkUnavailable as error:
        pytest.fail(str(error), pytrace=False)
    settings.REDIS_URL = cluster.redis_url
    settings.RQ_QUEUES = {name: {**queue, "URL": cluster.redis_url}
                          for name, queue in settings.RQ_QUEUES.items()}
    layer = settings.CHANNEL_LAYERS["default"]
    settings.CHANNEL_LAYERS = {"default": {**layer, "CONFIG": {
        **layer["CONFIG"], "hosts": [{**layer["CONFIG"]["hosts"][0],
                                      "address": cluster.redis_url}]}}}
    channel_layers.backends.clear()
    try:
        yield cluster
    finally:
        cluster.close()
        channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def _audit_signer_of_its_own(settings, tmp_path, monkeypatch):
    """Each test's database starts empty, so the audit signer's memory of the last head it
    signed (kept outside the database) is the test's own, and no default witness under var/
    collects every test's checkpoints (the processes a test starts inherit both)."""
    head = str(tmp_path / "audit-signer" / "signed-head.json")
    settings.AUDIT_SIGNED_HEAD_FILE = head
    settings.AUDIT_WITNESSES = []
    monkeypatch.setenv("AUDIT_SIGNED_HEAD_FILE", head)
    monkeypatch.setenv("AUDIT_WITNESSES", "none")


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # PBKDF2's deliberate slowness buys nothing in tests and costs seconds per persona.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


REFUND_AGENT_YAML = """\
apiVersion: governance/v1
kind: Agent
metadata:
  name: refund-agent
  owner: alice
  labels: {team: payments, env: prod}
  description: Issues refunds for damaged orders
spec:
  framework: langgraph
  connector: {type: sandbox}
  model: gpt-4.1
  version: "2.3.0"
  tools: [orders.lookup, payments.refund]
  data:
    - {resource: orders_db, access: read}
    - {resource: payments, access: write}
  actions:
    payments.refund: {approval_above: 500, max: 5000}
  limits:
    - {resource: customers_db, max_calls: 40, per: 1h}
    - {resource: customers_db, max_same_record: 3, per: 1h}
  enforcement: {default: correct, actions: escalate, behaviour: block}
"""


# A deployment that quietly grants CRM access and drops the $500 refund rule.
BAD_DEPLOYMENT = {
    "tools": ["crm.search", "orders.lookup", "payments.refund"],
    "data": [{"resource": "orders_db", "access": "read"},
             {"resource": "payments", "access": "write"},
             {"resource": "crm", "access": "write"}],
    "actions": {"payments.refund": {"max": 5000}},
}


def refund_manifest(**spec_changes):
    """The refund agent's manifest, with spec keys replaced."""
    import yaml

    from registry.manifest import validate_manifest

    document = yaml.safe_load(REFUND_AGENT_YAML)
    document["spec"].update(spec_changes)
    return validate_manifest(document)


def approved_agent(people: People, name: str, **spec_changes) -> Any:
    """An agent like the refund agent under another name, registered by alice and approved by
    bob (generation 1)."""
    from registry.choices import VersionSource
    from registry.models import Agent

    manifest = refund_manifest(**spec_changes)
    object.__setattr__(manifest, "name", name)
    (outcome,) = actions.apply_manifests([manifest], actor=people.alice,
                                         source=VersionSource.YAML)
    actions.approve_proposal(outcome.version.pk, actor=people.bob)
    return Agent.objects.get(name=name)


def token_client(people: People, agent: Any) -> APIClient:
    """An API client holding `agent`'s own token (issued by alice, its owner)."""
    _, key = actions.issue_agent_token(agent, actor=people.alice)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def decision_of(people: People, agent: Any, request: dict) -> dict:
    """The answer to `agent` asking, with its own token, for a decision on `request`."""
    return token_client(people, agent).post(
        f"/api/v1/agents/{agent.name}/decisions", request, format="json").json()


def confirmed_preference(**fields: Any) -> Any:
    """A notification preference set through the action and confirmed with the token that
    was sent to its address (as its person would, from the message)."""
    preference = actions.set_preference(**fields)
    by = preference.user or fields["actor"]
    return actions.verify_preference(preference.pk, actor=by,
                                     token=preference.verification_token)


def shadow_on(people: People, agent: Any, duration: str = "1d") -> None:
    """Shadow mode for one agent as the product allows it: its owner asks, bob (an approver
    who does not own it) approves; it ends by itself after `duration`."""
    from reconciliation import actions as reconciliation_actions

    reconciliation_actions.set_shadow(actor=agent.owner, agent=agent, enabled=True,
                                      duration=duration, reason="keep the drift in place")
    reconciliation_actions.approve_shadow(agent, actor=people.bob)


def approved_with_client(people: People, **spec_changes) -> tuple[Any, APIClient]:
    """The refund agent with these spec changes, registered by alice and approved by bob, and
    an API client holding its own token."""
    agent = approved_agent(people, "refund-agent", **spec_changes)
    return agent, token_client(people, agent)


@pytest.fixture
def agent_client(people, refund_agent) -> APIClient:
    """An API client holding the refund agent's own token."""
    return token_client(people, refund_agent)


@pytest.fixture
def refund_agent(people):
    """The refund agent, registered by alice and approved by bob (generation 1)."""
    from registry.choices import VersionSource
    from registry.models import Agent

    (outcome,) = actions.apply_manifests([refund_manifest()], actor=people.alice,
                                         source=VersionSource.YAML)
    actions.approve_proposal(outcome.version.pk, actor=people.bob)
    return Agent.objects.get(name="refund-agent")


class Worker:
    """A real `manage.py rqworker` process (with the RQ scheduler) on the test database: the
    production worker class (`RQ["WORKER_CLASS"]`, jobs run in the worker's own process)."""

    def __init__(self, *queues: str, **env: str) -> None:
        Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)
        self.log = open(Path(settings.VAR_DIR) / f"test-worker-{os.getpid()}-{id(self)}.log",  # noqa: SIM115
                        "w+")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "rqworker", *(queues or ("reconcile",)),
             "--with-scheduler"],
            cwd=ROOT, env=child_env(**env), stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)

    def kill(self) -> None:
        """SIGKILL the worker and its work-horse at once: nothing gets to clean up."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=15)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError):  # its scheduler, if it outlived it
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()


@pytest.fixture
def start_worker(transactional_db, redis_client):
    workers: list[Worker] = []

    def start(*queues: str, **env: str) -> Worker:
        worker = Worker(*queues, **env)
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()


def assert_trail_whole() -> None:
    """The audit trail verifies end to end: every seq there, linked and hashed, the head where
    the chain ends and every checkpoint signed. Fault tests end with it."""
    from audit.verify import verify_trail

    report = verify_trail()
    assert report.ok and report.first_broken_seq is None, report.to_dict()
    assert report.count > 0


def eventually(check, timeout: float = 60, interval: float = 0.2,
               message: str | Callable[[], str] = ""):
    """Poll `check` until it returns a truthy value; fail with `message` after `timeout`. The
    default is generous: CI is a loaded 2-core machine, and a passing test never waits it out.
    A callable `message` is called only on failure, so it tells what was true at the deadline
    (logs read when the wait began are still empty)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            said = message() if callable(message) else message
            raise AssertionError(said or f"condition not met within {timeout}s")
        time.sleep(interval)


def fresh_venv(where: Path, *requirements: str, python: str = sys.executable,
               timeout: float = 900, compiled: bool = False) -> Path:
    """A virtual environment at `where` (of `python`) with only `requirements` and what they
    depend on, as a user's `pip install` makes it; returns its python. Made without a pip of
    its own and filled by this one (`pip --python`): bootstrapping a pip per venv was seconds
    each. Byte-compiled only when `compiled`: compiling everything installed is most of an
    install (25 s against 11 s for the wheels), but the suite runs with
    PYTHONDONTWRITEBYTECODE, so each process of an uncompiled venv compiles what it imports
    again (a Django start 2 s → 5 s): compile a venv whose processes start more than a few
    times."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(where)], check=True,
                   timeout=120)
    target = where / "bin" / "python"
    requirements = tuple(built_if_in_checkout(r, where.parent / f"{where.name}-wheels")
                         for r in requirements)
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(target), "install",
                              "--quiet", *([] if compiled else ["--no-compile"]), *requirements],
                             capture_output=True, text=True, timeout=timeout)
    assert install.returncode == 0, f"{requirements}:\n{install.stderr[-4000:]}"
    return target


BUILD_LOCK = Path(tempfile.gettempdir()) / (
    f"agentgov-checkout-build-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]}.lock")


@contextlib.contextmanager
def building_in_checkout():
    """One build of the checkout's projects at a time, across the suite's workers: setuptools
    builds a local project in its own folder (`build/`, `*.egg-info`), and two builds at once
    (the wheel test, the deployment guide's install, the client's extras, on different
    workers) took each other's files ("No such file or directory" copying into bdist)."""
    with open(BUILD_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        yield


def built_if_in_checkout(requirement: str, wheels: Path) -> str:
    """A requirement naming a folder of the checkout (`clients/python[mcp]`) as the wheel pip
    builds of it, built under building_in_checkout() (its extras kept); any other as given."""
    folder, extras = re.fullmatch(r"(.*?)(\[[^\]]*\])?", requirement).groups()
    if not Path(folder).is_dir() or not Path(folder).resolve().is_relative_to(ROOT.resolve()):
        return requirement
    out = wheels / Path(folder).resolve().name
    shutil.rmtree(out, ignore_errors=True)  # a wheel left by an earlier build is not this one
    with building_in_checkout():
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                                "-w", str(out), folder], capture_output=True, text=True,
                               timeout=600)
    assert built.returncode == 0, f"{folder}:\n{built.stderr[-4000:]}"
    (wheel,) = out.glob("*.whl")
    return f"{wheel}{extras or ''}"


def installed(python: Path) -> dict[str, str]:
    """The distributions installed in `python`'s environment: their version by lower-case
    name."""
    listed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "list",
                             "--format=freeze"], capture_output=True, text=True, check=True,
                            timeout=120).stdout.lower()
    return dict(line.split("==", 1) for line in listed.split())


@pytest.fixture(scope="session")
def auditor_agentctl(tmp_path_factory) -> Path:
    """The auditor's agentctl: a fresh venv with only `pip install clients/python` (once)."""
    python = fresh_venv(tmp_path_factory.mktemp("auditor") / "venv",
                        str(ROOT / "clients" / "python"), timeout=600, compiled=True)
    assert "django" not in installed(python)
    return python.parent / "agentctl"


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, with nothing left connected to it at the end, so that
    PostgreSQL can drop it. The async tests' `sync_to_async` calls (thread-sensitive, outside
    any `async_to_sync`) run in asgiref's one shared executor thread, which keeps its own
    Django connection open for the rest of the run: it is closed in that thread. Any other
    session still there is named in a warning (a process or thread a test did not stop)."""
    yield
    if connection.vendor != "postgresql":
        return
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=60)
    # A thread a test started and that ended leaves its connection to the cyclic collector
    # (Django's connection objects refer to each other): collected here, it is closed, so
    # what remains is a thread or a process still running.
    gc.collect()

    def sessions() -> list[tuple[str, str, str]]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT application_name, backend_type, left(query, 200) FROM "
                           "pg_stat_activity WHERE datname = current_database() AND "
                           "pid <> pg_backend_pid()")
            return cursor.fetchall()

    # A process the last module stopped has exited, but its server process may not have
    # noticed yet (it ends its session on its own, moments later): it is given a few seconds.
    deadline = time.monotonic() + 10
    with django_db_blocker.unblock():
        while (left := sessions()) and time.monotonic() < deadline:
            time.sleep(0.2)
    if left:
        warnings.warn(f"sessions still connected to the test database: {left}", stacklevel=1)
