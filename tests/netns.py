"""Hosts of their own on one machine: Linux network namespaces, each joined to a bridge by a veth
pair, so every web process, every worker and the stores run on a host with its own address and
the network between them can be cut and restored, as in production across machines.

The root namespace plays the database host: PostgreSQL listens on its loopback only, so a relay
on the bridge's address carries each host's connections to it (PostgreSQL sees the relay, as it
would see a host behind a silent partition: a connection that stays open). Redis runs on a
"store" host of its own. A cut drops every packet silently in both directions (a `pfifo` queue
of length 0 on both ends of the host's veth: `tc netem` is not built into every kernel), so
connections hang and retransmit as they do when a cable or a switch goes, rather than failing
fast.

Needs root (CI runs as root); without it `Network()` fails with the reason. Names carry this
process's id and a random token, so parallel runs never collide, and a run that was killed
before its teardown has its leftovers removed by the next one."""

import asyncio
import contextlib
import ipaddress
import os
import random
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from config import embedded_redis

PREFIX = "agentgov"  # namespaces are agentgov-<pid>-<token>-<host>
LINK_PREFIX = "ag"  # links are ag<token>br (the bridge) and ag<token>h<n> (a host's veth)


class NetworkUnavailable(RuntimeError):
    """Namespaces cannot be made here (not root, or no iproute2)."""


def ip(*args: str, namespace: str | None = None, check: bool = True) -> str:
    """Run `ip` (in `namespace` when given); its output, or CalledProcessError with stderr."""
    argv = ["ip", *(["-n", namespace] if namespace else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode:
        raise subprocess.CalledProcessError(done.returncode, argv, done.stdout, done.stderr)
    return done.stdout


def tc(*args: str, namespace: str | None = None, check: bool = True) -> None:
    argv = [*(["ip", "netns", "exec", namespace] if namespace else []), "tc", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode:
        raise subprocess.CalledProcessError(done.returncode, argv, done.stdout, done.stderr)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers() -> None:
    """Namespaces and links of runs whose process is gone (killed before its teardown)."""
    for line in ip("netns", "list", check=False).splitlines():
        match = re.match(rf"{PREFIX}-(\d+)-([0-9a-f]{{6}})-\S+", line)
        if match and not _pid_alive(int(match.group(1))):
            ip("netns", "delete", match.group(0), check=False)
            for link in re.findall(rf"\d+: ({LINK_PREFIX}{match.group(2)}\w+)[@:]",
                                   ip("-o", "link", "show", check=False)):
                ip("link", "delete", link, check=False)


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.64.0.0/10 that no address or route here is in."""
    taken = ip("-4", "-o", "addr", "show") + ip("-4", "route", "show", "table", "all")
    for _ in range(100):
        subnet = ipaddress.ip_network(f"10.{random.randint(64, 127)}.{random.randint(0, 255)}.0/24")  # noqa: S311
        if f"{subnet.network_address}".rsplit(".", 1)[0] + "." not in taken:
            return subnet
    raise NetworkUnavailable("no free 10.64.0.0/10 subnet for the test network")


@dataclass
class Host:
    """One host: a namespace with one address, reached through its veth on the bridge."""

    name: str
    namespace: str
    address: str
    outer: str  # the veth's end on the bridge (root namespace)
    inner: str = "eth0"  # its end inside the namespace
    processes: list[subprocess.Popen] = field(default_factory=list)


class Network:
    """A bridge in the root namespace (the database host, at .1) and hosts joined to it."""

    def __init__(self) -> None:
        if os.geteuid() != 0:
            raise NetworkUnavailable(
                "the cross-host tests make Linux network namespaces, veth pairs and a bridge, "
                "which needs root (CI runs as root); run them as root or deselect them with "
                "-m 'not netns'")
        try:
            remove_leftovers()
        except FileNotFoundError as error:
            raise NetworkUnavailable(f"iproute2 is missing: {error}") from error
        self.token = secrets.token_hex(3)
        self.subnet = _free_subnet()
        self.bridge = f"{LINK_PREFIX}{self.token}br"
        self.gateway = str(self.subnet.network_address + 1)
        self.hosts: list[Host] = []
        self._cuts: set[tuple[str, str]] = set()
        try:
            ip("link", "add", self.bridge, "type", "bridge")
            ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
        except subprocess.CalledProcessError as error:
            self.close()
            raise NetworkUnavailable(f"could not make a bridge: {error.stderr.strip()}") from error

    def add_host(self, name: str) -> Host:
        """A new namespace with its veth on the bridge and the next address."""
        index = len(self.hosts) + 1
        host = Host(name=name, namespace=f"{PREFIX}-{os.getpid()}-{self.token}-{name}",
                    address=str(self.subnet.network_address + 1 + index),
                    outer=f"{LINK_PREFIX}{self.token}h{index}")
        self.hosts.append(host)
        ip("netns", "add", host.namespace)
        ip("link", "add", host.outer, "type", "veth", "peer", "name", host.inner,
           "netns", host.namespace)
        ip("link", "set", host.outer, "master", self.bridge, "up")
        ip("link", "set", "lo", "up", namespace=host.namespace)
        ip("addr", "add", f"{host.address}/24", "dev", host.inner, namespace=host.namespace)
        ip("link", "set", host.inner, "up", namespace=host.namespace)
        ip("route", "add", "default", "via", self.gateway, namespace=host.namespace)
        return host

    def start(self, host: Host, argv: list[str], *, env: dict[str, str], log: IO,
              cwd: Path) -> subprocess.Popen:
        """Run `argv` on `host` (its own session, so teardown reaches its children too)."""
        process = subprocess.Popen(["ip", "netns", "exec", host.namespace, *argv], cwd=cwd,
                                   env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        host.processes.append(process)
        return process

    def cut(self, host: Host) -> None:
        """Every packet to and from `host` is dropped, silently, until `restore`."""
        tc("qdisc", "replace", "dev", host.outer, "root", "pfifo", "limit", "0")
        tc("qdisc", "replace", "dev", host.inner, "root", "pfifo", "limit", "0",
           namespace=host.namespace)

    def restore(self, host: Host) -> None:
        tc("qdisc", "delete", "dev", host.outer, "root", check=False)
        tc("qdisc", "delete", "dev", host.inner, "root", check=False, namespace=host.namespace)

    def cut_between(self, one: Host, other: Host) -> None:
        """Packets between `one` and `other` are dropped, silently, both ways; each still
        reaches every other host."""
        for source, target in ((one, other), (other, one)):
            tc("qdisc", "replace", "dev", source.inner, "root", "handle", "1:", "htb",
               "default", "10", namespace=source.namespace)
            tc("class", "replace", "dev", source.inner, "parent", "1:", "classid", "1:10",
               "htb", "rate", "10gbit", namespace=source.namespace)
            tc("class", "replace", "dev", source.inner, "parent", "1:", "classid", "1:20",
               "htb", "rate", "10gbit", namespace=source.namespace)
            tc("qdisc", "replace", "dev", source.inner, "parent", "1:20", "handle", "20:",
               "pfifo", "limit", "0", namespace=source.namespace)
            tc("filter", "add", "dev", source.inner, "parent", "1:", "protocol", "ip", "prio",
               "1", "u32", "match", "ip", "dst", f"{target.address}/32", "flowid", "1:20",
               namespace=source.namespace)

    def restore_between(self, one: Host, other: Host) -> None:
        for host in (one, other):
            tc("qdisc", "delete", "dev", host.inner, "root", check=False,
               namespace=host.namespace)

    def pids(self, host: Host) -> list[int]:
        """Every process running on `host`."""
        return [int(pid) for pid in ip("netns", "pids", host.namespace, check=False).split()]

    def stop_processes(self, host: Host) -> None:
        """SIGTERM every process started on `host` (SIGKILL after 15 s), children included."""
        for process in host.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process in host.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=15)
        host.processes.clear()

    def close(self) -> None:
        """Stop every process, delete every namespace (which deletes its veth) and the
        bridge; safe to call twice and after a partial build."""
        for host in reversed(self.hosts):  # the stores last: the others leave cleanly
            with contextlib.suppress(Exception):
                self.stop_processes(host)
        for host in self.hosts:
            ip("netns", "delete", host.namespace, check=False)
            ip("link", "delete", host.outer, check=False)
        self.hosts.clear()
        ip("link", "delete", self.bridge, check=False)


class TcpRelay:
    """Accepts connections on (host, any port) and carries each to `target` and back, in a
    thread of this process: how hosts reach a server listening on the loopback only."""

    def __init__(self, host: str, target: tuple[str, int]) -> None:
        self.target = target
        self.loop = asyncio.new_event_loop()
        self._tasks: set[asyncio.Task] = set()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name="tcp-relay")
        self._thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, host, 0), self.loop).result(timeout=10)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(self._pipe(reader, upstream_writer),
                                 self._pipe(upstream_reader, writer), return_exceptions=True)
        finally:
            self._tasks.discard(task)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        async def shut() -> None:
            self.server.close()
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shut(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


class HostedCluster:
    """The production topology on hosts of their own: Redis on a "store" host, PostgreSQL
    behind the relay on the root namespace, and web processes (daphne) and workers (rqworker
    with the scheduler) each started on a new host by `web` and `worker`."""

    REDIS_PORT = 6379
    WEB_PORT = 8000

    def __init__(self, *, database: dict, root: Path, logs: Path) -> None:
        self.root, self.logs = root, logs
        self.network = Network()
        self.relay: TcpRelay | None = None
        self._logs: dict[str, IO] = {}
        try:
            self.relay = TcpRelay(self.network.gateway,
                                  (database.get("HOST") or "127.0.0.1",
                                   int(database.get("PORT") or 5432)))
            self.database_url = (f"postgres://{database.get('USER') or 'postgres'}@"
                                 f"{self.network.gateway}:{self.relay.port}/{database['NAME']}")
            self.store = self.network.add_host("store")
            self.redis_url = f"redis://{self.store.address}:{self.REDIS_PORT}/0"
            self.network.start(self.store, [
                "redis-server", "--bind", self.store.address, "--port", str(self.REDIS_PORT),
                "--save", "", "--appendonly", "no", "--protected-mode", "no",
                "--dir", str(logs)], env=dict(os.environ), log=self._log(self.store),
                cwd=root)
            self._wait_for(self.store, self.REDIS_PORT)
        except BaseException:
            self.close()
            raise

    def _log(self, host: Host) -> IO:
        self.logs.mkdir(parents=True, exist_ok=True)
        path = self.logs / f"netns-{self.network.token}-{host.name}.log"
        self._logs[host.name] = open(path, "w+")  # noqa: SIM115 - closed in close()
        return self._logs[host.name]

    def output(self, host: Host) -> str:
        """What the host's processes have printed so far (for failure messages)."""
        log = self._logs[host.name]
        log.flush()
        return Path(log.name).read_text()[-6000:]

    def _wait_for(self, host: Host, port: int, timeout: float = 90) -> None:
        """Until `host` accepts connections on `port` (a loaded CI machine starts slowly)."""
        deadline = time.monotonic() + timeout
        while not embedded_redis.port_answers(host.address, port):
            if any(p.poll() is not None for p in host.processes) or time.monotonic() > deadline:
                raise RuntimeError(f"{host.name} did not start:\n{self.output(host)}")
            time.sleep(0.1)

    def env(self, host: Host, **extra: str) -> dict[str, str]:
        """A process's environment on `host`: the stores over the network, its connections
        named after the host in pg_stat_activity."""
        env = dict(os.environ)
        env.update(DATABASE_URL=self.database_url, REDIS_URL=self.redis_url,
                   DJANGO_SETTINGS_MODULE="config.settings", PYTHONPATH=str(self.root),
                   PGAPPNAME=f"netns-{host.name}", PYTHONUNBUFFERED="1",
                   ALLOWED_HOSTS=f"{host.address},localhost,127.0.0.1")
        env.update(extra)
        return env

    def worker(self, name: str, **env: str) -> Host:
        """A worker host: `manage.py rqworker reconcile ingest default --with-scheduler`."""
        host = self.network.add_host(name)
        self._log(host)
        self.start_worker(host, **env)
        return host

    def start_worker(self, host: Host, **env: str) -> None:
        """Start the worker on `host` (again, as a supervisor restarts one that quit)."""
        self.network.start(host, [sys.executable, "manage.py", "rqworker", "reconcile", "ingest",
                                  "default", "--with-scheduler"],
                           env=self.env(host, **env), log=self._logs[host.name], cwd=self.root)

    def web(self, name: str, **env: str) -> tuple[Host, str]:
        """A web host running daphne on its own address; returns it and its base URL."""
        host = self.network.add_host(name)
        self.network.start(host, [sys.executable, "-m", "daphne", "-b", host.address, "-p",
                                  str(self.WEB_PORT), "config.asgi:application"],
                           env=self.env(host, **env), log=self._log(host), cwd=self.root)
        self._wait_for(host, self.WEB_PORT)
        return host, f"http://{host.address}:{self.WEB_PORT}"

    def close(self) -> None:
        """Everything down: processes, namespaces, veths, bridge, relay, logs."""
        self.network.close()
        if self.relay is not None:
            self.relay.close()
        for log in self._logs.values():
            log.close()
