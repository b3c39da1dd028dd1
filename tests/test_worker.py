"""The worker every process runs (config/worker.py): jobs in the worker's own process, with
what forking a work horse per job used to give kept: hung jobs bounded, connections reused but
dropped after a failure, the process replaced after so many jobs, a killed worker's scheduler
gone with it."""

import os
import signal

import django_rq
import pytest
from django.db import connection
from rq.job import JobStatus

from tests.conftest import eventually

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql",
                                reason="reads PostgreSQL's backend pids")


def finished(job) -> bool:
    return job.get_status(refresh=True) in (JobStatus.FINISHED, JobStatus.FAILED)


def run(queue, function, *args, **options):
    job = queue.enqueue(function, *args, **options)
    eventually(lambda: finished(job), timeout=60, message=f"{function} never ran")
    return job


def test_jobs_share_the_worker_process_and_its_database_connection(start_worker):
    worker = start_worker("default")
    queue = django_rq.get_queue("default", commit_mode="auto")
    first = run(queue, "tests.worker_jobs.backend_pid")
    second = run(queue, "tests.worker_jobs.backend_pid")
    assert first.return_value() == second.return_value(), worker.output()
    assert worker.process.poll() is None


def test_a_failed_job_does_not_leave_its_connection_to_the_next(start_worker):
    worker = start_worker("default")
    queue = django_rq.get_queue("default", commit_mode="auto")
    before = run(queue, "tests.worker_jobs.backend_pid").return_value()
    failed = run(queue, "tests.worker_jobs.fail_mid_query")
    assert failed.get_status() == JobStatus.FAILED
    after = run(queue, "tests.worker_jobs.backend_pid")
    assert after.get_status() == JobStatus.FINISHED, worker.output()
    assert after.return_value() != before  # a fresh connection, not the aborted one


def test_a_job_past_its_timeout_is_stopped_and_the_worker_goes_on(start_worker):
    worker = start_worker("default")
    queue = django_rq.get_queue("default", commit_mode="auto")
    slow = run(queue, "time.sleep", 120, job_timeout=1)
    assert slow.get_status() == JobStatus.FAILED
    assert "JobTimeoutException" in (slow.latest_result().exc_string or "")
    assert run(queue, "operator.add", 1, 2).return_value() == 3, worker.output()


def test_a_job_that_ignores_its_timeout_has_its_worker_killed(start_worker):
    worker = start_worker("default", WORKER_HANG_GRACE_SECONDS="1")
    queue = django_rq.get_queue("default", commit_mode="auto")
    queue.enqueue("tests.worker_jobs.hang", 120, job_timeout=1)
    eventually(lambda: worker.process.poll() is not None, timeout=60,
               message=lambda: f"the hung worker is still alive:\n{worker.output()}")
    assert worker.process.returncode == -signal.SIGKILL
    assert "outlived its timeout" in worker.output()
    with pytest.raises(ProcessLookupError):  # its scheduler went with it
        eventually(lambda: os.killpg(worker.process.pid, 0) and False, timeout=30)


def test_the_worker_replaces_itself_after_so_many_jobs(start_worker):
    worker = start_worker("default", WORKER_MAX_JOBS="2")
    queue = django_rq.get_queue("default", commit_mode="auto")
    pids = [run(queue, "tests.worker_jobs.backend_pid").return_value() for _ in range(5)]
    assert worker.output().count("replacing itself after 2 jobs") == 2
    assert worker.process.poll() is None  # the same process, a fresh interpreter
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]
