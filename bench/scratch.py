"""A scratch database and Redis for benchmarks, so a bench never touches real data.

PostgreSQL `agentgov_bench` (dropped and created) on the server of DATABASE_URL, or on
127.0.0.1:5432 when it answers, else a temporary SQLite file; Redis database 14 of REDIS_URL's
server or 127.0.0.1:6379 when it answers, else the embedded redis-server.
"""

import atexit
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from config import embedded_redis  # noqa: E402
from config.embedded_redis import port_answers  # noqa: E402
from config.private_files import create_private, var_dir  # noqa: E402


def scratch_database() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url and port_answers("127.0.0.1", 5432):
        url = "postgres://postgres@127.0.0.1:5432/postgres"
    # BENCH_DATABASE_NAME / BENCH_REDIS_DB let engineers sharing a server bench side by side.
    name = os.environ.get("BENCH_DATABASE_NAME", "agentgov_bench")
    if url.startswith("postgres"):
        import psycopg

        server = url.rsplit("/", 1)[0]
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            # BENCH_KEEP_DATABASE=1 reuses what an earlier run built (bench/pages.py's ten
            # million audit rows take a while to make).
            kept = os.environ.get("BENCH_KEEP_DATABASE") == "1" and conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            if not kept:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                conn.execute(f"CREATE DATABASE {name}")
        return f"{server}/{name}"
    return f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"


def scratch_redis() -> str:
    url = os.environ.get("REDIS_URL", "")
    if not url and port_answers("127.0.0.1", 6379):
        url = "redis://127.0.0.1:6379/0"
    if not url:  # the embedded one: importing the settings does not start it
        url = embedded_redis.serve_this_process(var_dir() / "redis")
    database = os.environ.get("BENCH_REDIS_DB", "14")
    return url.rsplit("/", 1)[0] + f"/{database}"


def deployed_env() -> dict[str, str]:
    """The environment of a web process as a company runs it: DEBUG off (no query log, no
    development helpers), with scratch secrets and a scratch audit key made for this run,
    and plain HTTP on the loopback (TLS ends at the proxy in front, docs/operating.md)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    folder = Path(tempfile.mkdtemp())
    atexit.register(shutil.rmtree, folder, True)  # the bench's web processes end before it
    key = folder / "audit-private-key.pem"
    create_private(key, Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode())
    return {**os.environ, "DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(48),
            "AUDIT_SIGNING_KEY": secrets.token_urlsafe(48), "AUDIT_PRIVATE_KEY_FILE": str(key),
            "SECURE_SSL_REDIRECT": "0"}


def setup_django() -> None:
    """Point this process (and the workers it starts) at the scratch stores and migrate."""
    os.environ["DATABASE_URL"] = scratch_database()
    os.environ["REDIS_URL"] = scratch_redis()
    # A scratch database is a new trail: the audit signer's memory of the last head it signed
    # (kept outside the database) must be a scratch one too, or it refuses the new trail as a
    # rewrite of the last bench's; and the development witness under var/ stays out of it.
    os.environ.setdefault("AUDIT_SIGNED_HEAD_FILE",
                          str(Path(tempfile.mkdtemp()) / "signed-head.json"))
    os.environ.setdefault("AUDIT_WITNESSES", "none")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    os.environ["REDIS_URL"] = settings.REDIS_URL  # the embedded one, if that is what we got
    call_command("migrate", verbosity=0)
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
