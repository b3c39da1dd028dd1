"""Behind PgBouncer (Debian's) in transaction mode the product refuses to start, naming the
reason; in session mode it runs. The audit writer's session-level lock is why."""

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from django.db import connection

from config import embedded_redis
from config.pooling import sessions_are_shared
from tests.conftest import ROOT, child_env, eventually, postgresql_only

FIRST_CONNECTION = ("import django; django.setup(); from django.db import connection; "
                    "connection.ensure_connection(); print('connected')")


@pytest.fixture
def pgbouncer(transactional_db):
    """Start PgBouncer in front of the test database in a given pool mode."""
    if connection.vendor != "postgresql":
        pytest.skip("PgBouncer pools PostgreSQL: run with DATABASE_URL on PostgreSQL")
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    assert Path(binary).exists(), "pgbouncer is missing: `make test` installs Debian's package"
    if os.geteuid() != 0:
        pytest.skip("PgBouncer refuses to run as root and is started as the postgres user: "
                    "needs root")
    owner = pwd.getpwnam("postgres")
    base = Path(tempfile.mkdtemp(prefix="agentgov-pgbouncer-"))
    os.chown(base, owner.pw_uid, owner.pw_gid)
    started = []
    cfg = connection.settings_dict

    def start(mode: str) -> str:
        port = embedded_redis.free_port()
        (base / "users.txt").write_text('"postgres" ""\n')
        ini = base / f"{mode}.ini"
        ini.write_text(
            "[databases]\n"
            f"agentgov = host={cfg.get('HOST') or '127.0.0.1'} port={cfg.get('PORT') or 5432} "
            f"dbname={cfg['NAME']}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {base}/users.txt\npool_mode = {mode}\n"
            # Django sends these at connect; PgBouncer must be told to let them through.
            "ignore_startup_parameters = options,extra_float_digits\n"
            f"logfile = {base}/{mode}.log\npidfile = {base}/{mode}.pid\n")
        process = subprocess.Popen(["runuser", "-u", "postgres", "--", binary, str(ini)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(process)
        eventually(lambda: embedded_redis.port_answers("127.0.0.1", port), timeout=60,
                   message=f"pgbouncer ({mode}) did not start")
        return f"postgres://postgres@127.0.0.1:{port}/agentgov"

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=20)
    shutil.rmtree(base, ignore_errors=True)


def first_connection(url: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", FIRST_CONNECTION], cwd=ROOT,
                          env=child_env(DATABASE_URL=url), capture_output=True, text=True,
                          timeout=180)


def test_transaction_pooling_is_refused_at_start_up(pgbouncer):
    result = first_connection(pgbouncer("transaction"))
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "pool_mode=session" in result.stderr


def test_session_pooling_and_no_pooler_run(pgbouncer):
    result = first_connection(pgbouncer("session"))
    assert (result.returncode, result.stdout.strip()) == (0, "connected"), result.stderr[-2000:]


@postgresql_only
@pytest.mark.django_db
def test_a_direct_connection_has_sessions_of_its_own():
    assert sessions_are_shared(connection.get_connection_params()) is False
