"""A Redis primary, its replica and three Sentinels of the test's own, on free loopback ports:
the same `redis-server` binary the embedded default runs (`embedded_redis.server_executable`),
the Sentinels started with `--sentinel`. Removed however the test ends."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from config import embedded_redis
from config.embedded_redis import free_port

MASTER = "agentgov"


def redis_server() -> str:
    return embedded_redis.server_executable()


class SentinelCluster:
    """Primary, replica and three Sentinels watching them (failover after 1 s down)."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="agentgov-sentinel-"))
        self.processes: dict[int, subprocess.Popen] = {}
        try:
            self.primary_port = self._server(free_port())
            self.replica_port = self._server(free_port(), "--replicaof", "127.0.0.1",
                                             str(self.primary_port))
            self.sentinel_ports = [self._sentinel(free_port()) for _ in range(3)]
            self._until(lambda: self.replica().info("replication")["master_link_status"]
                        == "up", "the replica to sync")
            self._until(lambda: all(self.sentinel(p).sentinel_master(MASTER)["num-slaves"] == 1
                                    and self.sentinel(p).sentinel_master(MASTER)
                                    ["num-other-sentinels"] == 2
                                    for p in self.sentinel_ports),
                        "the sentinels to find the replica and each other")
        except BaseException:
            self.close()
            raise

    def _start(self, port: int, argv: list[str]) -> int:
        log = open(self.base / f"{port}.log", "w")  # noqa: SIM115
        self.processes[port] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                cwd=self.base)
        self._until(lambda: embedded_redis.port_answers("127.0.0.1", port),
                    f"redis on {port} to answer")
        return port

    def _server(self, port: int, *extra: str) -> int:
        return self._start(port, [redis_server(), "--port", str(port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--dir", str(self.base),
                                  *extra])

    def _sentinel(self, port: int) -> int:
        conf = self.base / f"sentinel-{port}.conf"
        conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {self.base}\n"
                        f"sentinel monitor {MASTER} 127.0.0.1 {self.primary_port} 2\n"
                        f"sentinel down-after-milliseconds {MASTER} 1000\n"
                        f"sentinel failover-timeout {MASTER} 5000\n"
                        f"sentinel parallel-syncs {MASTER} 1\n")
        return self._start(port, [redis_server(), str(conf), "--sentinel"])

    @staticmethod
    def _until(check, what: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if check():
                    return
            except (redis.RedisError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}")
            time.sleep(0.2)

    def replica(self) -> redis.Redis:
        return redis.Redis(port=self.replica_port, socket_timeout=2)

    def sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_timeout=2)

    def sentinels_setting(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)

    def current_primary_port(self) -> int:
        host, port = self.sentinel(self.sentinel_ports[0]).sentinel_get_master_addr_by_name(
            MASTER)
        return int(port)

    def kill_primary(self) -> None:
        """SIGKILL the primary: no shutdown, no last save, its clients' sockets just die."""
        process = self.processes.pop(self.primary_port)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=15)

    def close(self) -> None:
        for process in self.processes.values():
            process.kill()
            process.wait(timeout=15)
        self.processes.clear()
        shutil.rmtree(self.base, ignore_errors=True)
