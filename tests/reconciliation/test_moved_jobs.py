"""Jobs that moved to the app owning them still run when the previous release queued them
under `reconciliation.jobs` or `registry.jobs` (RQ keeps the dotted path in Redis)."""

import importlib

import django_rq
import pytest
from rq import SimpleWorker
from rq.job import JobStatus
from rq.utils import import_attribute

from reconciliation import jobs
from registry import jobs as registry_jobs


@pytest.mark.parametrize("name", sorted(jobs.MOVED_JOBS))
def test_an_old_path_finds_the_job_in_its_new_home(name):
    home = importlib.import_module(jobs.MOVED_JOBS[name])
    assert import_attribute(f"reconciliation.jobs.{name}") is getattr(home, name)


@pytest.mark.parametrize("name", sorted(registry_jobs.MOVED_JOBS))
def test_an_old_registry_path_finds_the_job_in_its_new_home(name):
    home = importlib.import_module(registry_jobs.MOVED_JOBS[name])
    assert import_attribute(f"registry.jobs.{name}") is getattr(home, name)


def test_a_name_that_never_was_a_job_is_still_missing():
    with pytest.raises(AttributeError):
        jobs.record_everything  # noqa: B018
    with pytest.raises(AttributeError):
        registry_jobs.record_everything  # noqa: B018


def test_a_job_queued_under_the_old_path_runs(db, redis_client):
    queue = django_rq.get_queue("default", commit_mode="auto")
    job = queue.enqueue("reconciliation.jobs.expire_overdue_decisions")
    SimpleWorker([queue], connection=queue.connection).work(burst=True)
    job.refresh()
    assert (job.get_status(), job.return_value()) == (JobStatus.FINISHED, 0)
