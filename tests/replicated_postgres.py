"""A PostgreSQL primary and a streaming replica of its own, made by the test: `initdb` and
`pg_basebackup -R` from Debian's PostgreSQL binaries, run as the `postgres` OS user on two free
loopback ports, removed however the test ends. Needs root (to act as `postgres`)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from config.embedded_redis import free_port


class ReplicationUnavailable(RuntimeError):
    """This machine cannot make PostgreSQL clusters of its own."""


def bin_dir() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_basebackup"))
    if not found:
        raise ReplicationUnavailable("no PostgreSQL server binaries under /usr/lib/postgresql")
    return found[-1].parent


def writable_dev_null() -> None:
    """initdb's shell writes to /dev/null as the postgres user; a run on this machine once
    found it 0644 (something earlier in the suite changed it), so put back what every Linux
    system has rather than fail on the environment."""
    if os.stat("/dev/null").st_mode & 0o666 != 0o666:
        os.chmod("/dev/null", 0o666)


@dataclass
class Cluster:
    """One running PostgreSQL cluster."""

    data: Path
    port: int

    def url(self, database: str = "agentgov") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"


class ReplicatedPostgres:
    """A primary with one streaming replica; `close()` stops and removes both."""

    def __init__(self) -> None:
        if os.geteuid() != 0:
            raise ReplicationUnavailable("making PostgreSQL clusters needs root (CI runs as root)")
        try:
            self.owner = pwd.getpwnam("postgres")
        except KeyError:
            raise ReplicationUnavailable("no postgres OS user") from None
        self.bin = bin_dir()
        writable_dev_null()
        self.base = Path(tempfile.mkdtemp(prefix="agentgov-replication-"))
        os.chown(self.base, self.owner.pw_uid, self.owner.pw_gid)
        self.started: list[Cluster] = []
        try:
            self.primary = self._make_primary()
            self.replica = self._make_replica()
        except BaseException:
            self.close()
            raise

    def run(self, tool: str, *args: str, timeout: float = 180) -> str:
        result = subprocess.run(["runuser", "-u", "postgres", "--", str(self.bin / tool), *args],
                                capture_output=True, text=True, timeout=timeout, cwd=self.base)
        if result.returncode:
            raise RuntimeError(f"{tool} failed: {result.stderr or result.stdout}")
        return result.stdout

    def _start(self, cluster: Cluster) -> Cluster:
        self.run("pg_ctl", "-D", str(cluster.data), "-l", str(self.base / f"{cluster.port}.log"),
                 "-o", f"-p {cluster.port} -k {self.base} -c listen_addresses=127.0.0.1",
                 "-w", "-t", "120", "start")
        self.started.append(cluster)
        return cluster

    def stop(self, cluster: Cluster) -> None:
        if cluster in self.started:
            self.run("pg_ctl", "-D", str(cluster.data), "-m", "fast", "-w", "stop")
            self.started.remove(cluster)

    def _make_primary(self) -> Cluster:
        primary = Cluster(self.base / "primary", free_port())
        self.run("initdb", "-D", str(primary.data), "-U", "postgres", "--auth=trust",
                 "-E", "UTF8", "--no-sync")
        with open(primary.data / "postgresql.conf", "a") as conf:
            conf.write("wal_level = replica\nmax_wal_senders = 4\nfsync = off\n"
                       "synchronous_commit = off\nfull_page_writes = off\n")
        with open(primary.data / "pg_hba.conf", "a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        self._start(primary)
        self.run("createdb", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
                 "agentgov")
        return primary

    def _make_replica(self) -> Cluster:
        replica = Cluster(self.base / "replica", free_port())
        self.run("pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.port), "-U",
                 "postgres", "-D", str(replica.data), "-R", "-X", "stream", "--no-sync",
                 "--checkpoint=fast")
        return self._start(replica)

    def close(self) -> None:
        for cluster in list(reversed(self.started)):
            try:
                self.run("pg_ctl", "-D", str(cluster.data), "-m", "immediate", "-w", "stop",
                         timeout=60)
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
        self.started.clear()
        shutil.rmtree(self.base, ignore_errors=True)
