"""Settings come from the environment, fall back to embedded parts, fail loudly on bad values."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from config import embedded_redis
from config.env import SettingError, env_bool, env_int, env_url
from tests.conftest import ROOT, postgresql_only

# ~45 s of processes started one after another (a minute and more on a loaded machine): left
# among the modules that need no database, the last pytest-django orders, it ended the run alone.
pytestmark = pytest.mark.long(minutes=1)

STRONG = "Zr7-q0Vx_8pLm2Nw4Ks6Jt1Hy3Gd5Fb9Ac"

PROBE = (
    "import django; django.setup(); from django.conf import settings as s; "
    "print(s.DATABASES['default']['ENGINE']); print(s.REDIS_URL); print(s.DEBUG)"
)


def run_settings(env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings",
            "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", PROBE], env={**base, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_nothing_configured_means_sqlite_and_importing_the_settings_starts_nothing(tmp_path):
    result = run_settings({"VAR_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    engine, redis_url, debug = result.stdout.split()
    assert engine == "django.db.backends.sqlite3" and debug == "True"
    # No redis-server was started (schema generation, linters and one-off commands import
    # the settings): the URL points where nothing answers until something starts it.
    assert not (tmp_path / "redis").exists()
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    assert not embedded_redis.port_answers("127.0.0.1", port)


def manage(var: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "VAR_DIR": str(var), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "manage.py", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def redis_servers_under(var: Path) -> list[int]:
    """Ports of redis-servers started with a config under `var` that still answer."""
    config = embedded_redis.read_config(var / "redis")
    return [config.port] if config and embedded_redis.port_answers("127.0.0.1", config.port) else []


def test_one_off_commands_leave_no_redis_server_running_and_their_files_owner_only(tmp_path):
    var = tmp_path / "var"
    schema = manage(var, "spectacular", "--file", str(tmp_path / "schema.yaml"))
    assert schema.returncode == 0, schema.stderr
    assert not (var / "redis").exists()
    migrated = manage(var, "migrate", "--noinput", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    # A command that needs Redis starts the embedded one, with a password, and stops it.
    stats = manage(var, "rqstats")
    assert stats.returncode == 0, stats.stderr
    assert (var / "redis" / "redis.conf").exists() and redis_servers_under(var) == []
    assert "requirepass" in (var / "redis" / "redis.conf").read_text()
    made = [path for path in var.rglob("*")]
    assert {p.name for p in made} >= {"db.sqlite3", "secret-key", "audit-signing-key",
                                      "redis.conf"}
    loose = {str(p.relative_to(var)): oct(p.stat().st_mode & 0o777) for p in [var, *made]
             if p.stat().st_mode & 0o077}
    assert loose == {}, "readable by others"


def test_a_state_directory_other_users_share_is_refused_and_left_as_it_was(tmp_path):
    # VAR_DIR=/tmp once made /tmp owner-only (the secret key is written in VAR_DIR): every
    # other user and service of the host lost it. A shared directory is refused, unchanged.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    result = manage(shared, "migrate", "--noinput", "-v", "0")
    assert result.returncode != 0
    assert f"{shared} is shared with other users" in result.stderr
    assert "set VAR_DIR to a directory of its own" in result.stderr
    assert oct(shared.stat().st_mode & 0o7777) == "0o1777" and list(shared.iterdir()) == []
    # A directory of its own that is too open is still made owner-only.
    own = tmp_path / "own"
    own.mkdir()
    own.chmod(0o755)
    assert manage(own, "migrate", "--noinput", "-v", "0").returncode == 0
    assert own.stat().st_mode & 0o777 == 0o700


def test_the_embedded_redis_refuses_clients_without_its_password(tmp_path):
    url, started = embedded_redis.ensure_running(tmp_path / "redis")
    try:
        assert started
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port).ping()  # another local user, or a page doing DNS rebinding
        assert redis.Redis.from_url(url).ping()
    finally:
        embedded_redis.stop_running(tmp_path / "redis")
    assert not embedded_redis.port_answers("127.0.0.1", port)


def test_configured_urls_are_used(tmp_path):
    result = run_settings({
        "VAR_DIR": str(tmp_path),
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/agentgov",
        "REDIS_URL": "redis://127.0.0.1:6390/3",
    })
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == ["django.db.backends.postgresql", "redis://127.0.0.1:6390/3"]
    assert not (tmp_path / "redis").exists()


IDLE_PROBE = (
    "import django; django.setup(); from django.db import connection; "
    "cursor = connection.cursor(); cursor.execute('SHOW idle_in_transaction_session_timeout'); "
    "print(cursor.fetchone()[0])"
)
KEEPALIVE_PROBE = (
    "import os, socket, django; django.setup(); from django.db import connection; "
    "connection.cursor().execute('SELECT 1'); "
    "probe = socket.socket(fileno=os.dup(connection.connection.pgconn.socket)); "
    "print([probe.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE), *(probe.getsockopt("
    "socket.IPPROTO_TCP, option) for option in (socket.TCP_KEEPIDLE, socket.TCP_KEEPINTVL, "
    "socket.TCP_KEEPCNT))])"
)


def printed_by_a_fresh_process(probe: str, tmp_path, **settings: str) -> str:
    """What `probe` prints in a process of its own on PostgreSQL, under `settings`."""
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings",
           "PYTHONPATH": str(ROOT), "VAR_DIR": str(tmp_path), "REDIS_URL": "redis://x:1/0",
           # The server's own maintenance database: the configured one (`agentgov` under
           # `make test`) need not exist while the suite runs on its test database.
           "DATABASE_URL": os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/postgres",
           **settings}
    result = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@postgresql_only
@pytest.mark.parametrize("value, shown", [(None, "1min"), ("7", "7s")])
def test_postgresql_ends_a_session_left_idle_inside_a_transaction(tmp_path, value, shown):
    settings = {"DATABASE_IDLE_IN_TRANSACTION_SECONDS": value} if value is not None else {}
    assert printed_by_a_fresh_process(IDLE_PROBE, tmp_path, **settings) == shown


@postgresql_only
@pytest.mark.parametrize("value, probes", [(None, "[1, 30, 10, 3]"), ("6", "[1, 6, 2, 3]")])
def test_a_database_connection_probes_the_server_once_quiet_for_a_while(tmp_path, value,
                                                                        probes):
    """A process whose server ended its session during a network cut (the goodbye lost)
    learns it from a keepalive probe, instead of waiting on the socket until its job's
    timeout: the connection's own socket carries the probes (30 s quiet, every 10 s, three
    unanswered, unless DATABASE_KEEPALIVE_SECONDS says otherwise)."""
    settings = {"DATABASE_KEEPALIVE_SECONDS": value} if value is not None else {}
    assert printed_by_a_fresh_process(KEEPALIVE_PROBE, tmp_path, **settings) == probes


@pytest.mark.parametrize("env, message", [
    ({"DEBUG": "maybe"}, "DEBUG must be a boolean"),
    ({"DEBUG": "false", "REDIS_URL": "redis://x:1/0"}, "SECRET_KEY must be set when DEBUG is off"),
    ({"DEBUG": "false", "SECRET_KEY": STRONG, "REDIS_URL": "redis://x:1/0"},
     "AUDIT_SIGNING_KEY must be set when DEBUG is off"),
    ({"DEBUG": "false", "SECRET_KEY": STRONG, "AUDIT_SIGNING_KEY": STRONG,
      "REDIS_URL": "redis://x:1/0"},
     "AUDIT_PRIVATE_KEY or AUDIT_PRIVATE_KEY_FILE must be set when DEBUG is off"),
    ({"AUDIT_SEQUENCER": "sometimes", "REDIS_URL": "redis://x:1/0"},
     "AUDIT_SEQUENCER must be writers or workers"),
    ({"AUDIT_SIGNING_KEY": "k", "REDIS_URL": "redis://x:1/0"},
     "AUDIT_SIGNING_KEY is too weak: it needs at least 32 characters (got 1)"),
    ({"SECRET_KEY": "k" * 50, "REDIS_URL": "redis://x:1/0"},
     "SECRET_KEY is too weak: it needs at least 10 different characters (got 1)"),
    ({"SECRET_KEY": "django-insecure-" + STRONG, "REDIS_URL": "redis://x:1/0"},
     "SECRET_KEY is too weak: it needs not a placeholder"),
    ({"DECISION_WEBHOOK_SECRET": "hunter2", "REDIS_URL": "redis://x:1/0"},
     "DECISION_WEBHOOK_SECRET is too weak"),
    ({"DATABASE_URL": "mysql://root@localhost/x"}, "DATABASE_URL must be a URL with scheme"),
    ({"AUDIT_CHECKPOINT_EVERY": "0", "REDIS_URL": "redis://x:1/0"},
     "AUDIT_CHECKPOINT_EVERY must be at least 1"),
    ({"DATABASE_KEEPALIVE_SECONDS": "2", "REDIS_URL": "redis://x:1/0",
      "DATABASE_URL": "postgres://u@h:5432/d"}, "DATABASE_KEEPALIVE_SECONDS must be at least 3"),
    ({"DATABASE_IDLE_IN_TRANSACTION_SECONDS": "-1", "REDIS_URL": "redis://x:1/0",
      "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/agentgov"},
     "DATABASE_IDLE_IN_TRANSACTION_SECONDS must be at least 0"),
    ({"OIDC_CLIENT_ID": "console", "OIDC_CLIENT_SECRET": STRONG, "REDIS_URL": "redis://x:1/0"},
     "OIDC_CLIENT_ID needs OIDC_ISSUER"),
    ({"OIDC_CLIENT_ID": "console", "OIDC_ISSUER": "https://idp.example",
      "REDIS_URL": "redis://x:1/0"}, "OIDC_CLIENT_ID needs OIDC_CLIENT_SECRET"),
    ({"OIDC_CLIENT_SECRET": "short", "REDIS_URL": "redis://x:1/0"},
     "OIDC_CLIENT_SECRET is too weak"),
    ({"OIDC_ROLE_MAP": "agentgov-approvers=root", "REDIS_URL": "redis://x:1/0"},
     "OIDC_ROLE_MAP: 'agentgov-approvers=root' must be group=role"),
    ({"OIDC_ISSUER": "ftp://idp.example", "REDIS_URL": "redis://x:1/0"},
     "OIDC_ISSUER must be a URL with scheme"),
])
def test_bad_values_fail_loudly_at_start_up(tmp_path, env, message):
    result = run_settings({"VAR_DIR": str(tmp_path), **env})
    assert result.returncode != 0
    assert message in result.stderr
    for name in ("SECRET_KEY", "AUDIT_SIGNING_KEY", "DECISION_WEBHOOK_SECRET",
                 "OIDC_CLIENT_SECRET"):
        if name in env and len(env[name]) > 3:
            assert env[name] not in result.stderr  # a refused secret is never echoed


def test_a_weak_key_file_under_var_is_refused_too(tmp_path):
    (tmp_path / "audit-signing-key").write_text("x")
    result = run_settings({"VAR_DIR": str(tmp_path), "REDIS_URL": "redis://x:1/0"})
    assert result.returncode != 0
    assert f"AUDIT_SIGNING_KEY (from {tmp_path / 'audit-signing-key'}) is too weak" in (
        result.stderr)


def test_typed_helpers(monkeypatch):
    monkeypatch.setenv("X_BOOL", "off")
    assert env_bool("X_BOOL", True) is False
    monkeypatch.setenv("X_INT", "12a")
    with pytest.raises(SettingError, match="X_INT must be an integer"):
        env_int("X_INT", 1)
    monkeypatch.setenv("X_URL", "ftp://x")
    with pytest.raises(SettingError, match="X_URL must be a URL with scheme redis"):
        env_url("X_URL", {"redis"})
    monkeypatch.delenv("X_URL")
    assert env_url("X_URL", {"redis"}) is None
