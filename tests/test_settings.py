"""Settings come from the environment, fall back to embedded parts, fail loudly on bad values."""

import subprocess
import sys

import pytest

from config.env import SettingError, env_bool, env_int, env_url
from tests.conftest import ROOT

PROBE = (
    "import django; django.setup(); from django.conf import settings as s; "
    "print(s.DATABASES['default']['ENGINE']); print(s.REDIS_URL); print(s.DEBUG)"
)


def run_settings(env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings",
            "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", PROBE], env={**base, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_nothing_configured_means_sqlite_and_an_embedded_redis_server(tmp_path):
    from config import embedded_redis

    result = run_settings({"VAR_DIR": str(tmp_path)})
    try:
        assert result.returncode == 0, result.stderr
        engine, redis_url, debug = result.stdout.split()
        assert engine == "django.db.backends.sqlite3"
        assert redis_url.startswith("redis://127.0.0.1:")
        port = int(redis_url.split(":")[2].split("/")[0])
        assert embedded_redis.port_answers("127.0.0.1", port)  # a real server, still running
        assert debug == "True"
        # A second process shares the same embedded server instead of starting another.
        again = run_settings({"VAR_DIR": str(tmp_path)})
        assert again.stdout.split()[1] == redis_url
    finally:
        embedded_redis.stop_running(tmp_path / "redis")


def test_configured_urls_are_used(tmp_path):
    result = run_settings({
        "VAR_DIR": str(tmp_path),
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/agentgov",
        "REDIS_URL": "redis://127.0.0.1:6390/3",
    })
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == ["django.db.backends.postgresql", "redis://127.0.0.1:6390/3"]
    assert not (tmp_path / "redis").exists()


@pytest.mark.parametrize("env, message", [
    ({"DEBUG": "maybe"}, "DEBUG must be a boolean"),
    ({"DEBUG": "false", "REDIS_URL": "redis://x:1/0"}, "SECRET_KEY must be set when DEBUG is off"),
    ({"DEBUG": "false", "SECRET_KEY": "k" * 50, "REDIS_URL": "redis://x:1/0"},
     "AUDIT_SIGNING_KEY must be set when DEBUG is off"),
    ({"DEBUG": "false", "SECRET_KEY": "k" * 50, "AUDIT_SIGNING_KEY": "a" * 50,
      "REDIS_URL": "redis://x:1/0"},
     "AUDIT_PRIVATE_KEY or AUDIT_PRIVATE_KEY_FILE must be set when DEBUG is off"),
    ({"AUDIT_SEQUENCER": "sometimes", "REDIS_URL": "redis://x:1/0"},
     "AUDIT_SEQUENCER must be inline or workers"),
    ({"DATABASE_URL": "mysql://root@localhost/x"}, "DATABASE_URL must be a URL with scheme"),
    ({"AUDIT_CHECKPOINT_EVERY": "0", "REDIS_URL": "redis://x:1/0"},
     "AUDIT_CHECKPOINT_EVERY must be at least 1"),
])
def test_bad_values_fail_loudly_at_start_up(tmp_path, env, message):
    result = run_settings({"VAR_DIR": str(tmp_path), **env})
    assert result.returncode != 0
    assert message in result.stderr


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
