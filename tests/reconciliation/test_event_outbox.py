"""Events go through an outbox: each batch's events are stored with one outbox row in the ingest
transaction, counted in their Redis windows after commit (which deletes the row, or, when
they broke rules, leaves it until the jobs recording them have run), and drained by
recount_events when that never happened (a process died, Redis was down). Counting is
idempotent on the event id, so nothing is counted twice; windows a Redis restart lost are
refilled from the stored events, and a rule broken again in a window it broke before the
restart is still one finding."""

import uuid
from datetime import UTC, datetime, timedelta

import django_rq
import pytest
from django.db import transaction
from django.db.models import F
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient
from rq import SimpleWorker

from audit.models import AuditEntry
from reconciliation.models import Escalation, Finding
from registry.models import Agent
from runtime.actions.behaviour import recount_events
from runtime.models import UncountedBatch
from tests.conftest import approved_with_client, assert_session_durable

WINDOW = "bw:{agent_id}:customers_db:record:c-1:3600"


@pytest.fixture
def limited(people, redis_client) -> tuple[Agent, APIClient]:
    """An agent allowed 3 reads of one customer record an hour, logging what it breaks."""
    return approved_with_client(
        people, data=[{"resource": "customers_db", "access": "read"}],
        limits=[{"resource": "customers_db", "max_same_record": 3, "per": "1h"}],
        enforcement={"default": "correct", "behaviour": "log"})


def reads(count: int, minutes_ago: int = 30) -> list[dict]:
    return [{"id": uuid.uuid4().hex, "agent": "refund-agent",
             "ts": (datetime.now(UTC) - timedelta(minutes=minutes_ago - i)).isoformat(),
             "kind": "data_access", "resource": "customers_db", "record": "c-1"}
            for i in range(count)]


def run_ingest_worker() -> None:
    queue = django_rq.get_queue("ingest")
    SimpleWorker([queue], connection=queue.connection).work(burst=True)


def test_a_normal_ingest_counts_every_event_and_leaves_none_in_the_outbox(
        limited, redis_client, django_capture_on_commit_callbacks):
    agent, client = limited
    with django_capture_on_commit_callbacks(execute=True):
        body = client.post("/api/v1/events", reads(5), format="json").json()
    assert body["accepted"] == 5 and "rules" not in body
    # Counted; the row waits for the one job recording the rule they broke.
    (held,) = UncountedBatch.objects.all()
    assert (held.jobs, held.attempt, held.queued_at is not None) == (1, 0, True)
    assert redis_client.zcard(WINDOW.format(agent_id=agent.pk)) == 5
    assert recount_events() == 0  # counted, and its job not overdue: not the drain's
    run_ingest_worker()
    (finding,) = Finding.objects.filter(agent=agent, kind="same_record_exceeded")
    assert (finding.actual, finding.status) == (5, "logged")
    assert not UncountedBatch.objects.exists()
    assert recount_events() == 0  # nothing left for the drain


def test_a_batch_that_breaks_no_rule_leaves_no_row(
        limited, redis_client, django_capture_on_commit_callbacks):
    agent, client = limited
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post("/api/v1/events", reads(3), format="json").json()["accepted"] == 3
    assert not UncountedBatch.objects.exists()
    assert redis_client.zcard(WINDOW.format(agent_id=agent.pk)) == 3


def test_events_whose_request_died_after_commit_are_counted_once_by_the_drain(
        limited, redis_client, django_capture_on_commit_callbacks):
    agent, client = limited
    # The request commits its events and dies before its after-commit counting runs.
    with django_capture_on_commit_callbacks(execute=False) as never_ran:
        assert client.post("/api/v1/events", reads(4), format="json").json()["accepted"] == 4
    (held,) = UncountedBatch.objects.all()
    assert len(held.events) == 4
    window = WINDOW.format(agent_id=agent.pk)
    assert redis_client.zcard(window) == 0

    assert recount_events(settled_seconds=10) == 0  # the request may still be counting
    assert recount_events() == 4  # the cron's drain, once the batch has settled
    (held,) = UncountedBatch.objects.all()  # the drain's counting now waits for its job
    assert (held.jobs, held.attempt) == (1, 1)
    assert redis_client.zcard(window) == 4
    run_ingest_worker()
    assert not UncountedBatch.objects.exists()
    (finding,) = Finding.objects.filter(agent=agent, kind="same_record_exceeded")
    assert finding.actual == 4

    # Had the request only been slow, its counting now comes late: nothing is counted twice.
    for callback in never_ran:
        callback()
    run_ingest_worker()
    assert redis_client.zcard(window) == 4
    (finding,) = Finding.objects.filter(agent=agent, kind="same_record_exceeded")
    assert finding.actual == 4
    assert recount_events() == 0


def test_windows_lost_in_a_redis_restart_are_refilled_from_the_stored_events(
        limited, redis_client, django_capture_on_commit_callbacks):
    agent, client = limited
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/api/v1/events", reads(2, minutes_ago=40), format="json")
    redis_client.flushdb()  # Redis restarted without persistence: every window is gone
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/api/v1/events", reads(2, minutes_ago=20), format="json")
    assert redis_client.zcard(WINDOW.format(agent_id=agent.pk)) == 4
    run_ingest_worker()
    (finding,) = Finding.objects.filter(agent=agent, kind="same_record_exceeded")
    assert finding.actual == 4  # two reads before the restart and two after


@pytest.fixture
def escalating(people, redis_client) -> tuple[Agent, APIClient]:
    """The same limits under behaviour: escalate, so each finding opens an escalation."""
    return approved_with_client(
        people, data=[{"resource": "customers_db", "access": "read"}],
        limits=[{"resource": "customers_db", "max_same_record": 3, "per": "1h"}],
        enforcement={"default": "correct", "behaviour": "escalate"})


def test_a_window_broken_before_and_after_a_redis_restart_is_one_finding_and_one_escalation(
        escalating, redis_client, django_capture_on_commit_callbacks):
    agent, client = escalating
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/api/v1/events", reads(4, minutes_ago=40), format="json")
    run_ingest_worker()
    redis_client.flushdb()  # Redis restarted: windows and the window's dedupe name are gone
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/api/v1/events", reads(1, minutes_ago=10), format="json")
    run_ingest_worker()
    (finding,) = Finding.objects.filter(agent=agent)
    assert (finding.kind, finding.actual, finding.status) == ("same_record_exceeded", 5,
                                                               "escalated")
    assert Escalation.objects.filter(agent=agent).count() == 1
    assert AuditEntry.objects.filter(action="finding.opened").count() == 1


def test_an_unapproved_tool_used_before_and_after_a_redis_restart_is_one_finding(
        escalating, redis_client, django_capture_on_commit_callbacks):
    agent, client = escalating

    def use_tool() -> None:
        event = {"id": uuid.uuid4().hex, "agent": "refund-agent", "kind": "tool_call",
                 "tool": "shell.exec", "ts": datetime.now(UTC).isoformat()}
        with django_capture_on_commit_callbacks(execute=True):
            client.post("/api/v1/events", [event], format="json")
        run_ingest_worker()

    use_tool()
    redis_client.flushdb()
    use_tool()
    (finding,) = Finding.objects.filter(agent=agent)
    assert finding.kind == "tool_not_approved"
    assert Escalation.objects.filter(agent=agent).count() == 1


def test_a_died_batch_spread_over_several_days_is_drained_whole(
        escalating, redis_client, django_capture_on_commit_callbacks):
    agent, client = escalating
    now = datetime.now(UTC)
    uses = [{"id": uuid.uuid4().hex, "agent": "refund-agent", "kind": "tool_call",
             "tool": "shell.exec", "ts": (now - timedelta(days=days)).isoformat()}
            for days in (20, 3, 0)]
    with django_capture_on_commit_callbacks(execute=False):
        assert client.post("/api/v1/events", uses, format="json").json()["accepted"] == 3
    (held,) = UncountedBatch.objects.all()
    assert held.first_ts < held.last_ts - timedelta(days=19)  # one row for all three days

    assert recount_events() == 3
    assert UncountedBatch.objects.get().jobs == 1  # waiting for the job it queued
    run_ingest_worker()
    assert not UncountedBatch.objects.exists()
    (finding,) = Finding.objects.filter(agent=agent)
    assert (finding.kind, finding.status) == ("tool_not_approved", "escalated")


def test_the_drain_stops_after_the_batch_that_reaches_its_limit(
        limited, redis_client, django_capture_on_commit_callbacks):
    agent, client = limited
    for _ in range(3):
        with django_capture_on_commit_callbacks(execute=False):
            client.post("/api/v1/events", reads(2), format="json")
    assert recount_events(limit=3) == 4  # two whole batches
    assert UncountedBatch.objects.filter(queued_at=None).count() == 1
    assert recount_events(limit=3) == 2
    assert not UncountedBatch.objects.filter(queued_at=None).exists()
    assert redis_client.zcard(WINDOW.format(agent_id=agent.pk)) == 6
    run_ingest_worker()  # the jobs recording the fourth to sixth reads over the limit
    assert not UncountedBatch.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_batch_counted_outside_any_transaction_releases_its_row_and_leaves_the_session_durable(
        limited, redis_client):
    """As a web process runs it (no test transaction around the request): the counted batch's
    row goes, the session is left outside any transaction, and the delete's commit that did
    not wait for the disk is that transaction's alone: the next ones still wait for it."""
    agent, client = limited
    assert client.post("/api/v1/events", reads(3), format="json").json()["accepted"] == 3
    assert not UncountedBatch.objects.exists()
    assert redis_client.zcard(WINDOW.format(agent_id=agent.pk)) == 3
    assert_session_durable()
    with transaction.atomic():  # Django's idea of the session still holds
        Agent.objects.filter(pk=agent.pk).update(framework="crewai")
    assert Agent.objects.get(pk=agent.pk).framework == "crewai"



def outbox_metrics(client) -> dict[str, float]:
    """The outbox's series on /metrics, by name (and state)."""
    text = client.get("/metrics").content.decode()
    return {"/".join([sample.name, *sample.labels.values()]): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name.startswith("behaviour_event_batches")}


def age_of_oldest(seen: dict[str, float], state: str) -> float:
    """The oldest batch's age in `state`, left as 0 in `seen` (it moves with the clock)."""
    age, seen[f"behaviour_event_batches_oldest_seconds/{state}"] = (
        seen[f"behaviour_event_batches_oldest_seconds/{state}"], 0)
    return age


QUIET = {"behaviour_event_batches_pending/counting": 0,
         "behaviour_event_batches_pending/waiting_for_jobs": 0,
         "behaviour_event_batches_oldest_seconds/counting": 0,
         "behaviour_event_batches_oldest_seconds/waiting_for_jobs": 0,
         "behaviour_event_batches_recounted": 0}


def test_metrics_show_batches_not_yet_judged_how_old_and_how_many_were_counted_again(
        limited, client, django_capture_on_commit_callbacks):
    agent, api = limited
    assert outbox_metrics(client) == QUIET
    # A request commits its events and dies before counting them; 20 minutes pass.
    with django_capture_on_commit_callbacks(execute=False):
        assert api.post("/api/v1/events", reads(4), format="json").json()["accepted"] == 4
    UncountedBatch.objects.update(received_at=F("received_at") - timedelta(minutes=20))
    seen = outbox_metrics(client)
    assert 1200 <= age_of_oldest(seen, "counting") < 1260
    assert seen == {**QUIET, "behaviour_event_batches_pending/counting": 1}

    # The drain counts it: it now waits for the job recording the rule it broke, and keeps
    # its age (the rule has gone unrecorded since the events came).
    assert recount_events() == 4
    seen = outbox_metrics(client)
    assert 1200 <= age_of_oldest(seen, "waiting_for_jobs") < 1260
    assert seen == {**QUIET, "behaviour_event_batches_pending/waiting_for_jobs": 1,
                    "behaviour_event_batches_recounted": 1}

    run_ingest_worker()  # the rule is recorded: nothing waits
    assert Finding.objects.filter(agent=agent, kind="same_record_exceeded").exists()
    assert outbox_metrics(client) == QUIET
