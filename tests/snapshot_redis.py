"""A real redis-server that keeps its data only in the snapshots it is told to save, and can be
crashed (stopped without saving) and started again from its last save: what a crash does to a
Redis that saves snapshots. The `snapshot_redis` fixture (tests/conftest.py) points the
product's windows and ingest queue at one."""

import subprocess
import time
from pathlib import Path

import redis

from config import embedded_redis


class SnapshotRedis:
    """A redis-server whose data lives only in the snapshots it is told to save."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, embedded_redis.free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            [embedded_redis.server_executable(), "--port", str(self.port), "--bind",
             "127.0.0.1", "--dir", str(self.folder), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                if redis.Redis(port=self.port, socket_timeout=1).ping():
                    return
            except redis.RedisError:  # not listening yet, or still loading its snapshot
                assert self.process.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port)

    def save(self) -> None:
        self.client().save()

    def crash_and_restart(self) -> None:
        """Stopped without saving (as a crash leaves it) and started from its last save."""
        try:
            self.client().shutdown(nosave=True)
        except redis.ConnectionError:  # it went away while answering
            pass
        self.process.wait(timeout=30)
        self.start()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
