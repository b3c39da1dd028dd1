"""Retention on PostgreSQL: a deployment that has run for months lets go of its old events,
observations, runs and alerts a whole day partition at a time, each drop in the audit trail;
an agent's current observed state is never let go however old; the coming days' partitions
are made ahead; the backtest's query reads only its days' partitions; a retention shorter than
the rules need is refused at start-up (and kept at the floor if checks were skipped)."""

import re
import subprocess
import sys
import time
import uuid
from datetime import timedelta

import django_rq
import psycopg
import pytest
from django.db import connection
from django.utils import timezone
from rq import Queue, SimpleWorker
from rq.cron import CronScheduler

from audit.choices import AuditAction
from audit.models import AuditEntry
from reconciliation import partitions
from reconciliation.actions.observations import note_unregistered_observation, record_observation
from reconciliation.actions.retention import apply_retention, make_partitions
from reconciliation.jobs import enforce_retention
from reconciliation.models import AlertEvent, Correction, Finding, ObservedState, ReconcileRun
from reconciliation.retention import Keep as Kept
from reconciliation.retention import check_retention, keep
from runtime.models import BehaviourEvent
from runtime.retention import EVENTS
from tests.conftest import ROOT, assert_trail_whole, child_env, database_url

# Day partitions are PostgreSQL's; on SQLite retention deletes rows in batches (tested apart).
partitioned = pytest.mark.skipif(connection.vendor != "postgresql",
                                 reason="day partitions are PostgreSQL's")


def where(row) -> str:
    """The partition a row lives in."""
    table = type(row)._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT tableoid::regclass::text FROM "{table}" WHERE id = %s', [row.pk])
        return cursor.fetchone()[0]


def event(agent, ts, **fields) -> BehaviourEvent:
    return BehaviourEvent.objects.create(event_id=uuid.uuid4().hex, agent=agent,
                                         agent_name=agent.name, ts=ts, kind="tool_call",
                                         tool="lookup", **fields)


def run(agent, at) -> ReconcileRun:
    return ReconcileRun.objects.create(agent=agent, trigger="resync", generation=1,
                                       started_at=at, result="converged")


def dropped(kind: str) -> list[dict]:
    return [e.before for e in AuditEntry.objects.filter(
        action=AuditAction.RETENTION_PARTITION_DROPPED).order_by("seq")
        if e.before["kind"] == kind]


@pytest.fixture
def months_ago(refund_agent):
    """The refund agent as it was 100 days ago, when the job made that time's partitions."""
    then = timezone.now() - timedelta(days=100)
    make_partitions(now=then)
    return refund_agent, then


@partitioned
def test_expired_days_go_as_whole_partitions_each_in_the_trail(months_ago, people):
    agent, then = months_ago
    now = timezone.now()
    old_event, new_event = event(agent, then), event(agent, now - timedelta(hours=1))
    old_run, new_run = run(agent, then), run(agent, now)
    finding = Finding.objects.create(agent=agent, fingerprint="f", kind="tool_added",
                                     pointer="/tools/x", severity="high", area="tools",
                                     generation=1)
    correction = Correction.objects.create(finding=finding, agent=agent, run=old_run,
                                           idempotency_key="k1", operation={})
    old_alert = AlertEvent.objects.create(at=then, event="drift.detected")
    new_alert = AlertEvent.objects.create(at=now, event="drift.detected")
    assert where(old_event) == partitions.partition_name(
        "reconciliation_behaviourevent", then.date())

    gone = apply_retention(now=now)

    assert not BehaviourEvent.objects.filter(pk=old_event.pk).exists()
    assert not ReconcileRun.objects.filter(pk=old_run.pk).exists()
    assert not AlertEvent.objects.filter(pk=old_alert.pk).exists()
    for kept in (new_event, new_run, new_alert):
        assert type(kept).objects.filter(pk=kept.pk).exists()
    correction.refresh_from_db()  # the correction stays; the run that applied it is gone
    assert correction.run_id is None
    assert (gone["events"], gone["runs"], gone["alerts"]) == (1, 1, 1)

    # One entry per dropped day, saying which day and how many rows went with it.
    events = dropped("events")
    with connection.cursor() as cursor:
        days_left = partitions.day_partitions(cursor, "reconciliation_behaviourevent")
    first_kept = (now - timedelta(days=90)).date()
    assert days_left and all(p.day >= first_kept for p in days_left)
    assert len(events) == 98  # the 90 days kept then, that day and 7 ahead: all expired now
    (with_rows,) = [e for e in events if e["rows"]]
    assert with_rows == {
        "kind": "events", "partition": f"reconciliation_behaviourevent_p{then:%Y%m%d}",
        "from": f"{then:%Y-%m-%d}T00:00:00+00:00",
        "to": f"{then + timedelta(days=1):%Y-%m-%d}T00:00:00+00:00", "rows": 1}
    (run_day,) = [e for e in dropped("runs") if e["rows"]]
    assert run_day["corrections_unlinked"] == 1
    entry = AuditEntry.objects.filter(action=AuditAction.RETENTION_PARTITION_DROPPED).first()
    assert entry.actor == "system:retention" and "RETENTION_" in entry.reason

    assert apply_retention(now=now) == {"events": 0, "observations": 0, "runs": 0, "alerts": 0}
    assert_trail_whole()


@partitioned
def test_an_agents_latest_observation_is_kept_however_old(months_ago, people):
    agent, then = months_ago
    superseded, _ = record_observation(agent, {"tools": ["lookup"]}, actor=agent,
                                       source="push", trigger_reconcile=False)
    _, quiet, _ = note_unregistered_observation("quiet-agent", {"tools": []}, actor="system:test",
                                                source="push")
    ObservedState.objects.filter(pk__in=[superseded.pk, quiet.pk]).update(observed_at=then,
                                                                           last_seen_at=then)
    current, changed = record_observation(agent, {"tools": ["lookup", "refund"]}, actor=agent,
                                          source="push", trigger_reconcile=False)
    assert changed and where(quiet) != "reconciliation_observedstate_default"

    apply_retention()

    assert not ObservedState.objects.filter(pk=superseded.pk).exists()
    kept = ObservedState.objects.get(pk=quiet.pk)  # the shadow agent's only, hence current
    assert (kept.state, kept.observed_at) == ({"tools": []}, then)
    assert where(kept) == "reconciliation_observedstate_default"
    assert ObservedState.objects.filter(pk=current.pk).exists()
    (day,) = [e for e in dropped("observations") if e["rows"]]
    assert (day["rows"], day["latest_kept"]) == (2, 1)
    # Kept past its day, it does not come back as a drop on every run...
    assert apply_retention()["observations"] == 0
    # ...but goes once a newer report supersedes it (with the default partition, whole).
    note_unregistered_observation("quiet-agent", {"tools": ["x"]}, actor="system:test",
                                  source="push")
    assert apply_retention()["observations"] == 1
    assert not ObservedState.objects.filter(pk=quiet.pk).exists()
    assert dropped("observations")[-1]["partition"] == "reconciliation_observedstate_default"
    assert_trail_whole()


@partitioned
def test_rows_that_came_while_the_job_was_away_wait_in_the_default_then_move_or_go(
        refund_agent):
    now = timezone.now()
    # Twelve days ahead: the migration made seven; the row waits in the default partition.
    later = run(refund_agent, now + timedelta(days=12))
    assert where(later) == "reconciliation_reconcilerun_default"

    created = make_partitions(now=now + timedelta(days=10))

    assert f"reconciliation_reconcilerun_p{now + timedelta(days=12):%Y%m%d}" in created
    assert where(later) == f"reconciliation_reconcilerun_p{now + timedelta(days=12):%Y%m%d}"
    for table in ("behaviourevent", "observedstate", "reconcilerun", "alertevent"):
        with connection.cursor() as cursor:
            days = [p.day for p in partitions.day_partitions(cursor, f"reconciliation_{table}")]
        assert days[-1] == (now + timedelta(days=17)).date()
        assert len(set(days)) == len(days) == (days[-1] - days[0]).days + 1  # no gaps
    assert make_partitions(now=now + timedelta(days=10)) == []

    # A row for a day already dropped lands in the default and goes whole with it.
    stray = run(refund_agent, now - timedelta(days=400))
    assert where(stray) == "reconciliation_reconcilerun_default"
    assert apply_retention(now=now)["runs"] == 1
    assert ReconcileRun.objects.filter(pk=later.pk).exists()
    assert where(later) == f"reconciliation_reconcilerun_p{now + timedelta(days=12):%Y%m%d}"
    (entry,) = dropped("runs")
    assert (entry["partition"], entry["rows"], entry["rows_kept"]) == (
        "reconciliation_reconcilerun_default", 1, 0)


@pytest.mark.django_db(transaction=True)  # the other connection must see the partitions
@partitioned
def test_a_busy_table_makes_the_job_wait_a_little_not_stall_ingest(months_ago):
    agent, then = months_ago
    old = event(agent, then)
    reader = psycopg.connect(database_url().replace("postgres://", "postgresql://"),
                             autocommit=False)
    try:  # a long transaction that read events holds its lock on the table
        reader.execute("SELECT count(*) FROM reconciliation_behaviourevent").fetchone()
        started = time.monotonic()
        assert apply_retention()["events"] == 0
        assert time.monotonic() - started < 120  # gave up on its lock, did not wait it out
        assert BehaviourEvent.objects.filter(pk=old.pk).exists()
    finally:
        reader.close()
    assert apply_retention()["events"] == 1  # the next run goes on
    assert not BehaviourEvent.objects.filter(pk=old.pk).exists()


@partitioned
def test_the_backtests_query_reads_only_its_weeks_partitions(refund_agent):
    now = timezone.now()
    event(refund_agent, now - timedelta(days=2))
    since = now - timedelta(days=7)
    query = BehaviourEvent.objects.filter(agent=refund_agent, foreign=False, ts__gte=since,
                                          ts__lte=now)
    plan = query.explain()
    read = set(re.findall(r"reconciliation_behaviourevent_(p\d{8}|default)", plan))
    expected = {f"p{since + timedelta(days=n):%Y%m%d}" for n in range(8)}
    assert read == expected, plan
    # The heartbeat's update names the row's day, so it touches one partition.
    observed, _ = record_observation(refund_agent, {"tools": []}, actor=refund_agent,
                                     source="push", trigger_reconcile=False)
    plan = ObservedState.objects.filter(pk=observed.pk, observed_at=observed.observed_at
                                        ).explain()
    assert set(re.findall(r"reconciliation_observedstate_(p\d{8}|default)", plan)) == {
        f"p{observed.observed_at:%Y%m%d}"}, plan


def test_a_retention_shorter_than_the_rules_need_is_refused_at_start_up(settings):
    settings.RETENTION_EVENTS_DAYS = 7
    (error,) = check_retention()
    assert error.id == "retention.E001"
    assert "RETENTION_EVENTS_DAYS=7" in error.msg and "30 days" in error.msg
    # Should the checks be skipped, the job keeps the floor and says so in each entry.
    assert keep(EVENTS) == Kept(30, "RETENTION_EVENTS_DAYS=7 is under the 30 days the longest"
                                    " window a rule may count needs; kept 30")
    checked = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT,
                             env=child_env(RETENTION_EVENTS_DAYS="7"), capture_output=True,
                             text=True, timeout=120)
    assert checked.returncode != 0
    assert "retention.E001" in checked.stderr and "at least 30" in checked.stderr


def test_the_job_is_scheduled_and_runs_on_a_worker(settings, redis_client, months_ago):
    agent, then = months_ago
    old = event(agent, then)
    scheduler = CronScheduler(connection=redis_client)
    scheduler.load_config_from_file("config.cron")
    jobs = {job.func.__name__: job for job in scheduler.get_jobs()}
    assert jobs["enforce_retention"].interval == settings.RETENTION_CHECK_SECONDS
    assert jobs["enforce_retention"].queue_name == "default"

    # rq's own queue: django-rq's would hold the job until the test's transaction commits.
    queue = Queue("default", connection=django_rq.get_connection("default"))
    job = queue.enqueue(enforce_retention)
    SimpleWorker([queue], connection=queue.connection).work(burst=True)
    job.refresh()
    assert job.is_finished, job.exc_info
    assert job.return_value()["gone"]["events"] == 1
    assert not BehaviourEvent.objects.filter(pk=old.pk).exists()
