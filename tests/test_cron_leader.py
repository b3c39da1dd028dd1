"""Two cron processes (two hosts, for availability) enqueue each periodic job once: one leads,
the other takes over when the leader dies."""

import io
import logging
import os
import signal
import subprocess
import sys
import time

import pytest
from rq.cron import get_cron_job_history_key

from config.cron_leader import LEADER_KEY, LeaderCronScheduler
from tests.conftest import ROOT, child_env, eventually

# ~25 s of cron processes taking over from each other (a minute on a loaded machine): last in
# pytest-django's order (no database), it ended the run beside test_settings.
pytestmark = pytest.mark.long(minutes=1)

PROBE = get_cron_job_history_key("tests.worker_jobs.count_cron_run")
LEASE = "3"


@pytest.fixture
def start_cron(redis_client, tmp_path):
    processes = []

    def start(command: str = "cron") -> subprocess.Popen:
        log = open(tmp_path / f"cron-{len(processes)}.log", "w+")  # noqa: SIM115
        argv = [sys.executable, "manage.py", command, "tests.cron_probe"]
        process = subprocess.Popen(argv, cwd=ROOT, env=child_env(CRON_LEADER_SECONDS=LEASE),
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        processes.append((process, log))
        return process

    yield start
    for process, log in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
        log.close()


def runs(redis_client) -> list[float]:
    """When the probe job was enqueued, oldest first."""
    return [score for _, score in redis_client.zrange(PROBE, 0, -1, withscores=True)]


def leader_pid(redis_client) -> int | None:
    holder = redis_client.get(LEADER_KEY)
    return int(holder.decode().split(":")[1]) if holder else None


def closest_gap(stamps: list[float]) -> float:
    return min(later - earlier for earlier, later in zip(stamps, stamps[1:], strict=False))


def test_two_cron_processes_enqueue_each_run_once_and_the_follower_takes_over(
        start_cron, redis_client):
    first, second = start_cron(), start_cron()
    eventually(lambda: len(runs(redis_client)) >= 8, timeout=120,
               message="the probe job was not enqueued every second")
    # Both processes are up and looping (each logs its start), and runs are one second apart:
    # a second enqueuer would put two runs within the same second.
    stamps = runs(redis_client)
    assert closest_gap(stamps[1:]) >= 0.9, stamps
    leader = leader_pid(redis_client)
    assert leader in (first.pid, second.pid)
    follower = second if leader == first.pid else first

    os.killpg(leader, signal.SIGKILL)  # no chance to hand over: the lease must lapse
    killed_at = time.time()
    eventually(lambda: leader_pid(redis_client) == follower.pid, timeout=60,
               message="the follower never took the lease")
    eventually(lambda: runs(redis_client)[-1] > killed_at, timeout=60,
               message="no run was enqueued after the leader died")
    taken = min(stamp for stamp in runs(redis_client) if stamp > killed_at)
    assert taken - killed_at < int(LEASE) + 30  # the lease, and a loaded machine's slack
    before = len(runs(redis_client))
    eventually(lambda: len(runs(redis_client)) >= before + 4, timeout=60)
    after = [stamp for stamp in runs(redis_client) if stamp > taken]
    assert closest_gap([taken, *after]) >= 0.9


def test_without_the_lease_two_processes_enqueue_twice(start_cron, redis_client):
    """What the lease prevents: RQ's own cron scheduler, twice, enqueues every run twice."""
    start_cron("rqcron"), start_cron("rqcron")
    eventually(lambda: len(runs(redis_client)) >= 12, timeout=120)
    stamps = runs(redis_client)
    span = stamps[-1] - stamps[0]
    assert len(stamps) > span * 1.5, (len(stamps), span)


def test_a_stopped_leader_hands_over_at_once(start_cron, redis_client):
    first = start_cron()
    eventually(lambda: leader_pid(redis_client) == first.pid, timeout=120)
    second = start_cron()
    first.send_signal(signal.SIGTERM)
    first.wait(timeout=60)
    # Its lease is gone as it exits (it would otherwise hold for CRON_LEADER_SECONDS).
    assert leader_pid(redis_client) in (None, second.pid)
    eventually(lambda: leader_pid(redis_client) == second.pid, timeout=60,
               message="the second process did not take the handed-over lease")


def test_a_stop_signal_that_lands_in_a_log_write_still_stops_the_cron(redis_client,
                                                                      monkeypatch, capsys):
    """RQ stops its cron by raising from the signal handler; a signal that arrives while the
    cron writes a log line (it logs every job it enqueues) raised inside logging, which
    swallowed it (printing "--- Logging error ---" and a traceback), and the cron ran on
    until it was killed (seen stopping `make demo`)."""
    scheduler = LeaderCronScheduler(connection=redis_client, lease_seconds=3)

    signalled = []

    class SignalledWhileWriting(io.StringIO):
        def write(self, text: str) -> int:
            if "now leading" in text and not signalled:
                signalled.append(text)
                # as the signal would, mid-write: the frame it lands in is this one
                scheduler._request_stop(signal.SIGTERM, sys._getframe())
            return super().write(text)

    handler = logging.StreamHandler(SignalledWhileWriting())
    logger = logging.getLogger("config.cron_leader")
    logger.addHandler(handler)
    monkeypatch.setattr(logger, "level", logging.INFO)
    monkeypatch.setattr(logging, "raiseExceptions", True)  # as in production
    sleeps = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) > 2:
            raise RuntimeError("the cron is still running after its stop signal")

    monkeypatch.setattr(time, "sleep", sleep)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        scheduler.start()  # returns: the stop was not lost
    finally:
        logger.removeHandler(handler)
        for sig, previous in handlers.items():
            signal.signal(sig, previous)
    assert signalled and sleeps == []
    assert redis_client.get(LEADER_KEY) is None  # and it handed the lease over on its way out
    assert "Logging error" not in capsys.readouterr().err
