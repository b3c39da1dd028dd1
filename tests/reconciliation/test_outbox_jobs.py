"""A batch's outbox row waits for the jobs that record the rules its events broke: a Redis that
crashes and restarts from its last snapshot, or fails over to a replica behind it, can lose
jobs it had just taken, and the broken rules were then never recorded or enforced (the row was
gone the moment the jobs were queued). Now the last job to run deletes the row, and
recount_events counts a batch whose jobs are overdue again (only while the ingest queue is
empty: a backlog is jobs late, not lost)."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rq import SimpleWorker

from audit.models import AuditEntry
from reconciliation.models import Finding
from runtime import actions as runtime_actions
from runtime import event_store, windows
from runtime.actions.behaviour import recount_events
from runtime.models import UncountedBatch
from tests.conftest import approved_agent, assert_session_durable

CAPPED = {"data": [{"resource": "customers_db", "access": "read"}],
          "limits": [{"resource": "customers_db", "max_calls": 5, "per": "1h"}],
          "enforcement": {"default": "correct", "behaviour": "log"}}


def reads(count: int) -> list[dict]:
    return [{"id": uuid.uuid4().hex, "agent": "capped", "kind": "data_access",
             "ts": datetime.now(UTC).isoformat(), "resource": "customers_db",
             "record": uuid.uuid4().hex} for _ in range(count)]


def ingest(people, events, capture) -> dict:
    with capture(execute=True):
        return runtime_actions.ingest_events(events, actor=people.admin).to_dict()


def run_ingest_worker() -> None:
    queue = windows.ingest_queue()
    SimpleWorker([queue], connection=queue.connection).work(burst=True)


def test_broken_rules_whose_jobs_a_redis_crash_lost_are_recorded_by_the_drain(
        people, snapshot_redis, django_capture_on_commit_callbacks):
    agent = approved_agent(people, "capped", **CAPPED)
    snapshot_redis.save()  # the last snapshot before the batch: its job is not in it
    assert ingest(people, reads(7), django_capture_on_commit_callbacks)["accepted"] == 7
    assert windows.ingest_queue().count == 1
    snapshot_redis.crash_and_restart()
    assert windows.ingest_queue().count == 0  # the job went with the crash
    run_ingest_worker()
    assert not Finding.objects.filter(agent=agent).exists()

    (held,) = UncountedBatch.objects.all()  # the batch still waits for its job
    assert (held.jobs, held.attempt) == (1, 0)
    assert recount_events(settled_seconds=10) == 0  # not overdue yet
    assert recount_events(jobs_overdue=timedelta(0)) == 7  # counted again, the job queued
    assert windows.ingest_queue().count == 1
    run_ingest_worker()
    (finding,) = Finding.objects.filter(agent=agent)
    assert (finding.kind, finding.actual, finding.status) == ("rate_limit_exceeded", 7, "logged")
    assert not UncountedBatch.objects.exists()


def test_jobs_waiting_in_the_queue_are_late_not_lost(
        people, redis_client, django_capture_on_commit_callbacks):
    agent = approved_agent(people, "capped", **CAPPED)
    ingest(people, reads(7), django_capture_on_commit_callbacks)
    assert recount_events(jobs_overdue=timedelta(0)) == 0  # a backlog: not counted again
    assert UncountedBatch.objects.get().attempt == 0
    run_ingest_worker()
    assert Finding.objects.filter(agent=agent, kind="rate_limit_exceeded").count() == 1
    assert not UncountedBatch.objects.exists()


PAYMENTS = {"data": [{"resource": "payments", "access": "write"}], "limits": [],
            "actions": {"payments.refund": {"max": 50000}}}


@pytest.mark.django_db(transaction=True)  # as a worker runs them: each job's commit is real
def test_a_group_block_whose_job_redis_lost_is_applied_when_the_batch_is_counted_again(
        people, redis_client, django_capture_on_commit_callbacks):
    """A block rule's breach is recorded by one job and its agents blocked by a second, queued
    when the first commits: losing the second left the findings open and the agents running
    for good (counting again found the findings made and queued no block)."""
    from registry.models import Agent
    from runtime.actions.group_rules import create_group_rule

    for name in ("pay-a", "pay-b"):
        approved_agent(people, name, **PAYMENTS)
    Agent.objects.update(labels={"team": "payments"})
    create_group_rule(actor=people.dana, effect="block", name="payments-tokens",
                      selector={"team": "payments"}, match={"kind": "model_call"},
                      measure="tokens", limit=10000, per="1h")
    now = datetime.now(UTC).isoformat()
    calls = [{"id": uuid.uuid4().hex, "agent": name, "ts": now, "kind": "model_call",
              "model": "gpt-4.1", "input_tokens": 6000, "output_tokens": 0}
             for name in ("pay-a", "pay-b")]
    ingest(people, calls, django_capture_on_commit_callbacks)
    queue = windows.ingest_queue()
    assert [job.func_name for job in queue.jobs] == ["runtime.jobs.record_group_breach"]
    SimpleWorker([queue], connection=queue.connection).work(burst=True, max_jobs=1)
    assert [job.func_name for job in queue.jobs] == ["runtime.jobs.block_group_job"]
    assert UncountedBatch.objects.get().jobs == 1  # the breach recorded, the block to come
    queue.empty()  # Redis lost the block job
    assert set(Finding.objects.values_list("agent__name", "status")) == {
        ("pay-a", "open"), ("pay-b", "open")}

    assert recount_events(jobs_overdue=timedelta(0)) == 2
    run_ingest_worker()
    assert set(Finding.objects.values_list("agent__name", "status")) == {
        ("pay-a", "blocked"), ("pay-b", "blocked")}
    assert dict(Agent.objects.values_list("name", "lifecycle")) == {
        "pay-a": "suspended", "pay-b": "suspended"}
    assert not UncountedBatch.objects.exists()

    # A block job that comes again (a retry, two counts' jobs meeting) changes nothing.
    from runtime.actions.group_blocks import block_involved
    from runtime.models import GroupBreach

    before = (AuditEntry.objects.count(), list(Finding.objects.values("pk", "status", "reason")))
    block_involved(GroupBreach.objects.get().pk, list(Finding.objects.values_list("pk", flat=True)))
    assert (AuditEntry.objects.count(),
            list(Finding.objects.values("pk", "status", "reason"))) == before


@pytest.fixture
def batch(db) -> UncountedBatch:
    now = timezone.now()
    return UncountedBatch.objects.create(received_at=now, first_ts=now, last_ts=now, events=[1])


def state(row: UncountedBatch) -> tuple[int, int, bool] | None:
    """(unfinished jobs, attempt, counted) of the row, or None once it is gone."""
    row = UncountedBatch.objects.filter(pk=row.pk).first()
    return None if row is None else (row.jobs, row.attempt, row.queued_at is not None)


def test_the_row_goes_when_the_last_of_its_jobs_has_run(batch):
    event_store.release_counted(batch.pk, 2)
    assert state(batch) == (2, 0, True)
    event_store.jobs_finished([(batch.pk, 0)])
    assert state(batch) == (1, 0, True)
    event_store.jobs_finished([(batch.pk, 0)])
    assert state(batch) is None


def test_a_batch_that_queued_no_job_releases_its_row_at_once(batch):
    event_store.release_counted(batch.pk)
    assert state(batch) is None


def test_a_job_that_ran_before_its_batch_said_how_many_it_queued_does_not_release_the_row(batch):
    event_store.jobs_finished([(batch.pk, 0)])  # a fast worker, before the request's release
    assert state(batch) == (-1, 0, False)
    event_store.release_counted(batch.pk, 2)
    assert state(batch) == (1, 0, True)
    event_store.jobs_finished([(batch.pk, 0)])
    assert state(batch) is None


def test_a_requeued_agents_job_holds_the_row_too(batch):
    event_store.release_counted(batch.pk, 1)
    event_store.jobs_added([(batch.pk, 0)])  # an agent's rules retried in a job of their own
    event_store.jobs_finished([(batch.pk, 0)])
    assert state(batch) == (1, 0, True)
    event_store.jobs_finished([(batch.pk, 0)])
    assert state(batch) is None


def test_a_counting_taken_over_by_the_drain_answers_for_the_row_no_more(batch):
    """The drain counted the batch again (attempt 1): the first counting's late job, or its
    request's late release, must not release the row the drain's jobs answer for now."""
    event_store.release_counted(batch.pk, 1)
    UncountedBatch.objects.filter(pk=batch.pk).update(attempt=1, jobs=0, queued_at=None)
    event_store.release_counted(batch.pk, 1, attempt=1)
    event_store.jobs_finished([(batch.pk, 0)])
    event_store.release_counted(batch.pk, 0, attempt=0)
    assert state(batch) == (1, 1, True)
    event_store.jobs_finished([(batch.pk, 1)])
    assert state(batch) is None


@pytest.mark.django_db(transaction=True)
def test_outside_any_transaction_each_count_is_one_round_trip_and_the_session_stays_durable():
    """As a web process and a worker run it: one statement sent per count, and the commit
    that did not wait for the disk is its own transaction's alone."""
    now = timezone.now()
    row = UncountedBatch.objects.create(received_at=now, first_ts=now, last_ts=now, events=[1])
    with CaptureQueriesContext(connection) as sent:
        event_store.release_counted(row.pk, 2)
        event_store.jobs_finished([(row.pk, 0)])
    if connection.vendor == "postgresql":  # SQLite: a statement at a time in a transaction
        assert len(sent.captured_queries) == 2
    assert state(row) == (1, 0, True)
    event_store.jobs_finished([(row.pk, 0)])
    assert state(row) is None
    assert_session_durable()
