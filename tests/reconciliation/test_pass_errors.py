"""A pass that fails on something other than the platform (a database lock timeout, a
deadlock, a bug) is queued again with backoff, as controller-runtime requeues every error: the
observation it was asked to judge is already stored, and the agent's next heartbeat, which
changes nothing, asks for no pass. The failure still reaches RQ's failed jobs, and the
retries end at RECONCILE_MAX_RETRIES."""

import django_rq
import pytest
from django.db import OperationalError
from rq.registry import ScheduledJobRegistry

from reconciliation.controller import handler, work_queue
from reconciliation.models import Finding
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, approved_agent


def scheduled_passes(queue) -> list:
    registry = ScheduledJobRegistry(queue=queue)
    return [queue.fetch_job(job_id) for job_id in registry.get_job_ids()]


def test_a_pass_that_fails_on_the_database_is_retried_and_the_retry_corrects(
        people, redis_client, monkeypatch, settings):
    settings.RECONCILE_MAX_RETRIES = 2
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    assert handler.reconcile_agent(agent.pk, "approved") == "converged"
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="a bad deployment: three changes to undo")
    reconcile = handler.passes.reconcile
    failures = []

    def locked_database(*args, **kwargs):
        failures.append(args)
        raise OperationalError("database is locked")

    monkeypatch.setattr(handler.passes, "reconcile", locked_database)
    queue = django_rq.get_queue("reconcile")
    with pytest.raises(OperationalError):  # RQ records the failed job, with its traceback
        handler.reconcile_agent(agent.pk, "observation")
    (retry,) = scheduled_passes(queue)
    assert retry.func_name == handler.PASS_JOB
    assert retry.args == (agent.pk, "retry", 1)
    assert not redis_client.exists(work_queue.LOCK_KEY.format(agent_id=agent.pk))

    monkeypatch.setattr(handler.passes, "reconcile", reconcile)  # the database answers again
    assert handler.reconcile_agent(*retry.args, **retry.kwargs) == "corrected"
    assert set(Finding.objects.filter(agent=agent).values_list("status", flat=True)) == {
        "corrected"}


def test_the_retries_of_a_failing_pass_end(people, redis_client, monkeypatch, settings):
    settings.RECONCILE_MAX_RETRIES = 2
    agent = approved_agent(people, "refund-agent")

    def broken(*args, **kwargs):
        raise OperationalError("deadlock detected")

    monkeypatch.setattr(handler.passes, "reconcile", broken)
    queue = django_rq.get_queue("reconcile")
    attempt, seen = 0, []
    while True:
        with pytest.raises(OperationalError):
            handler.reconcile_agent(agent.pk, "retry", attempt)
        waiting = [job for job in scheduled_passes(queue) if job.id not in seen]
        if not waiting:
            break
        (job,) = waiting
        seen.append(job.id)
        attempt = job.args[2]
    assert attempt == 2 and len(seen) == 2  # two retries, then the periodic resync's turn
