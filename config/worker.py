"""The RQ worker every process runs (`manage.py rqworker` reads `RQ["WORKER_CLASS"]`): jobs run
in the worker's own process, not in a work horse forked per job.

Forking cost each pass a new process and a new PostgreSQL connection (about half of drift →
verified). What forking gave is kept here:
- a job that hangs is bounded by its timeout: RQ's SIGALRM interrupts it in this process, and
  a job still running `WORKER_HANG_GRACE_SECONDS` after that (stuck where no signal reaches)
  has the process killed by a watchdog thread, like a killed worker: its locks lapse and
  another worker finishes the pass;
- a crash loses nothing: a killed worker is a killed work horse (locks lapse, the periodic
  resync re-derives the pass), and the scheduler process it started dies with it;
- memory cannot grow without bound: after `WORKER_MAX_JOBS` jobs, or once the process has
  `WORKER_MAX_MEMORY_MB` resident, the worker finishes its job, stops cleanly and replaces itself
  (exec, same pid: supervisord, the tests' fixtures and the benches keep tracking it); only
  in the worker command's own process (config/process_role.py): run inside another, it stops;
- a worker takes over RQ's scheduler within `MAINTENANCE_SECONDS` of its lock lapsing (RQ's
  own 10 minutes, and an idle worker blocking 405 s between looks, meant a worker holding the
  scheduler lock, cut off or killed, left every scheduled job unrun for up to 10 minutes);
- database connections are reused across jobs (`CONN_MAX_AGE`, health-checked) but closed
  after a job that failed, and dropped when unusable or too old before and after each job.
"""

import ctypes
import logging
import os
import resource
import signal
import sys
import threading
import time
from pathlib import Path

import redis
from django.conf import settings
from django.db import close_old_connections, connections
from rq import SimpleWorker
from rq.job import Job
from rq.queue import Queue

from config import process_role, redis_capabilities

log = logging.getLogger(__name__)
# How often a worker looks after the queues (RQ's "maintenance"): cleans the registries and,
# when no scheduler runs here, tries to take the scheduler lock.
MAINTENANCE_SECONDS = 30
_PR_SET_PDEATHSIG = 1
_fork_hook = False


def _die_with_parent() -> None:
    """In a child forked by the worker (RQ's scheduler process): end when the worker ends, even
    by SIGKILL, so a killed worker leaves no scheduler behind (Linux only; elsewhere a no-op)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (AttributeError, OSError):
        pass


class InProcessWorker(SimpleWorker):
    """Runs jobs in this process, bounded in time and memory (see the module docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("maintenance_interval", MAINTENANCE_SECONDS)
        super().__init__(*args, **kwargs)
        self.jobs_run = 0
        self.recycle = False
        self._deadline: float | None = None  # monotonic time past which the job is hung
        self._watchdog: threading.Thread | None = None

    @property
    def dequeue_timeout(self) -> int:
        # An idle worker checks for maintenance between blocking reads: keep them short.
        return min(super().dequeue_timeout, MAINTENANCE_SECONDS)

    @property
    def connection_timeout(self) -> int:
        # RQ derives its sockets' read timeout from the blocking read's; kept at RQ's own
        # (worker_ttl - 5 s), so a worker waits out a network partition of minutes rather than
        # quitting after 40 s.
        return max(1, self.worker_ttl - 15) + 10

    def bootstrap(self, *args, **kwargs) -> None:
        global _fork_hook
        _refuse_a_redis_too_old(self.connection)
        if not _fork_hook:
            os.register_at_fork(after_in_child=_die_with_parent)
            _fork_hook = True
        super().bootstrap(*args, **kwargs)
        self._watchdog = threading.Thread(target=self._watch, daemon=True, name="job-watchdog")
        self._watchdog.start()

    def execute_job(self, job: Job, queue: Queue) -> None:
        timeout = job.timeout or self.queue_class.DEFAULT_TIMEOUT
        close_old_connections()
        if timeout != -1:
            self._deadline = time.monotonic() + timeout + settings.WORKER_HANG_GRACE_SECONDS
        try:
            super().execute_job(job, queue)
        finally:
            self._deadline = None
            close_old_connections()
        self.jobs_run += 1
        if self._due_for_recycling():
            self.recycle = True
            self._stop_requested = True  # the work loop stops before taking another job

    def handle_job_failure(self, job: Job, queue: Queue, *args, **kwargs) -> None:
        # A failed job may have left its connection mid-statement or in an unknown state.
        connections.close_all()
        super().handle_job_failure(job, queue, *args, **kwargs)

    def work(self, *args, **kwargs) -> bool:
        worked = super().work(*args, **kwargs)
        # Only the worker command's own process replaces itself: exec'ing any other process's
        # command line (a test's, a shell's that runs a worker in-process) would start it anew.
        if self.recycle and process_role.role == process_role.WORKER:
            self.log.info("Worker %s: replacing itself after %d jobs (%d MB resident)",
                          self.name, self.jobs_run, _memory_mb())
            connections.close_all()
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(sys.executable, sys.orig_argv)
        return worked

    def _due_for_recycling(self) -> bool:
        return (self.jobs_run >= settings.WORKER_MAX_JOBS
                or _memory_mb() >= settings.WORKER_MAX_MEMORY_MB)

    def _watch(self) -> None:
        while True:
            time.sleep(1)
            deadline = self._deadline
            if deadline is not None and time.monotonic() > deadline:
                log.critical("worker %s: a job outlived its timeout by %s s; killing the "
                             "worker so its locks lapse", self.name,
                             settings.WORKER_HANG_GRACE_SECONDS)
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGKILL)


def _memory_mb() -> int:
    """The process's resident memory now. Not getrusage's peak: Linux keeps that across exec,
    so a replaced worker would count its predecessor's peak and replace itself after every job."""
    try:
        resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    except OSError:  # no /proc: the peak, the best there is
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return resident_pages * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)


def _refuse_a_redis_too_old(connection: redis.Redis) -> None:
    """Stop before taking a job when the queue's Redis cannot run the product: RQ would fail
    on its first BLMOVE, and ingest's jobs on GETEX, each time in the middle of the work. A
    Redis that does not answer is left to RQ's own handling (it waits and retries)."""
    try:
        redis_capabilities.check(connection)
    except redis_capabilities.TooOld as error:
        log.error("Worker not started: %s", error)
        raise SystemExit(f"Worker not started: {error}") from None
    except redis.RedisError:
        pass
