"""A human's answer reaches the agent's webhook at least once: an attempt whose job Redis lost
(a failover, a restart from disk) or whose worker died mid-send is sent again by the sweep;
a late job and the sweep's copy of it send once; each outcome is on the decision, which the
agent reads with GET /api/v1/decisions/{id}."""

from datetime import timedelta

import django_rq
import pytest
from django.utils import timezone
from rq import SimpleWorker

from reconciliation import actions
from reconciliation.models import Escalation
from runtime.actions import webhooks
from runtime.jobs import notify_decision
from runtime.models import Decision
from tests.reconciliation.test_behaviour_rules import Hook, register

pytestmark = pytest.mark.usefixtures("transactional_db", "redis_client")
LATER = timedelta(minutes=3)  # past ATTEMPT_GRACE: an attempt not settled by then was lost


@pytest.fixture
def hook(settings):
    hook = Hook()
    settings.DECISION_WEBHOOK_HOSTS = [hook.allowed]
    yield hook
    hook.close()


def run_default_queue() -> None:
    queue = django_rq.get_queue("default")
    SimpleWorker([queue], connection=queue.connection).work(burst=True)


def ask_and_deny(people, client, url: str) -> str:
    """The agent asks with a webhook and carol denies; nothing has run the queue yet."""
    asked = client.post("/api/v1/agents/refund-agent/decisions",
                        {"action": "payments.refund", "amount": 900, "callback_url": url},
                        format="json").json()
    assert client.get(f"/api/v1/decisions/{asked['id']}").json()["webhook"] == {
        "status": "waiting_for_answer", "attempts": 0, "error": ""}
    actions.resolve_escalation(Escalation.objects.get(decision_id=asked["id"]).pk,
                               actor=people.carol, resolution="deny", comment="no receipt")
    return asked["id"]


def scheduled_webhooks() -> list[tuple]:
    """The webhook attempts waiting for their time in RQ's scheduled registry."""
    queue = django_rq.get_queue("default")
    jobs = [queue.fetch_job(job_id) for job_id in queue.scheduled_job_registry.get_job_ids()]
    return [tuple(job.args) for job in jobs if job.func_name == webhooks.JOB]


def webhook_of(client, decision_id: str) -> dict:
    return client.get(f"/api/v1/decisions/{decision_id}").json()["webhook"]


def test_a_webhook_whose_job_redis_lost_is_sent_by_the_sweep_once(people, hook):
    agent, client = register(people)
    decision_id = ask_and_deny(people, client, hook.url)
    assert webhook_of(client, decision_id) == {"status": "pending", "attempts": 0, "error": ""}
    django_rq.get_queue("default").empty()  # Redis failed over and lost the job

    assert webhooks.resend_overdue() == 0  # not overdue yet: its job may only be late
    assert webhooks.resend_overdue(timezone.now() + LATER) == 1
    run_default_queue()
    ((body, _),) = hook.received
    assert decision_id.encode() in body and b'"rejected"' in body
    assert webhook_of(client, decision_id) == {"status": "delivered", "attempts": 1,
                                               "error": ""}
    assert webhooks.resend_overdue(timezone.now() + 2 * LATER) == 0  # delivered: left alone
    run_default_queue()
    assert len(hook.received) == 1


def test_a_late_job_and_the_sweeps_copy_of_it_send_once(people, hook):
    agent, client = register(people)
    decision_id = ask_and_deny(people, client, hook.url)
    # The queue was behind: the sweep took the job for lost and queued a copy.
    assert webhooks.resend_overdue(timezone.now() + LATER) == 1
    assert django_rq.get_queue("default").count >= 2
    run_default_queue()
    assert len(hook.received) == 1
    assert webhook_of(client, decision_id) == {"status": "delivered", "attempts": 1,
                                               "error": ""}


def test_a_worker_that_died_while_sending_has_its_webhook_sent_again(people, hook):
    agent, client = register(people)
    decision_id = ask_and_deny(people, client, hook.url)
    django_rq.get_queue("default").empty()
    assert webhooks.claim(decision_id, 0) is not None  # a worker took attempt 0, then died
    assert webhooks.resend_overdue(timezone.now() + LATER) == 1
    run_default_queue()
    assert len(hook.received) == 1
    assert webhook_of(client, decision_id) == {"status": "delivered", "attempts": 2,
                                               "error": ""}


def test_a_webhook_answering_500_is_tried_five_times_then_failed(people, settings):
    hook = Hook(status=500)
    settings.DECISION_WEBHOOK_HOSTS = [hook.allowed]
    try:
        agent, client = register(people)
        decision_id = ask_and_deny(people, client, hook.url)
        assert notify_decision(decision_id, 0) == "retrying"
        # the next attempt is scheduled after a backoff, and the sweep leaves it alone
        assert webhook_of(client, decision_id) == {"status": "pending", "attempts": 1,
                                                   "error": "answered 500"}
        assert scheduled_webhooks() == [(decision_id, 1)]
        assert webhooks.resend_overdue() == 0
        assert [notify_decision(decision_id, n) for n in (1, 2, 3, 4)] == [
            "retrying", "retrying", "retrying", "gave up"]
        assert notify_decision(decision_id, 4) == "taken"  # a copy of the last: nothing sent
    finally:
        hook.close()
    assert len(hook.received) == 5
    assert webhook_of(client, decision_id) == {"status": "failed", "attempts": 5,
                                               "error": "answered 500"}
    assert webhooks.resend_overdue(timezone.now() + timedelta(hours=1)) == 0


def test_a_webhook_that_refuses_or_is_no_longer_allowed_is_not_sent_again(people, hook,
                                                                          settings):
    refusing = Hook(status=404)
    settings.DECISION_WEBHOOK_HOSTS = [hook.allowed, refusing.allowed]
    try:
        agent, client = register(people)
        refused = ask_and_deny(people, client, refusing.url)
        run_default_queue()
    finally:
        refusing.close()
    assert webhook_of(client, refused) == {"status": "refused", "attempts": 1,
                                           "error": "answered 404"}
    # The allow-list shrank between the answer and the send.
    asked = client.post("/api/v1/agents/refund-agent/decisions",
                        {"action": "payments.refund", "amount": 950, "callback_url": hook.url},
                        format="json").json()
    actions.resolve_escalation(Escalation.objects.get(decision_id=asked["id"]).pk,
                               actor=people.carol, resolution="allow", comment="receipt seen")
    settings.DECISION_WEBHOOK_HOSTS = [refusing.allowed]
    run_default_queue()
    assert hook.received == []
    shrunk = webhook_of(client, asked["id"])
    assert shrunk["status"] == "not_allowed" and "not in the allow-list" in shrunk["error"]
    assert webhooks.resend_overdue(timezone.now() + timedelta(hours=1)) == 0


def test_a_job_the_previous_release_queued_still_sends_the_webhook(people, hook):
    agent, client = register(people)
    waiting = client.post("/api/v1/agents/refund-agent/decisions",
                          {"action": "payments.refund", "amount": 900, "callback_url": hook.url},
                          format="json").json()
    assert notify_decision(waiting["id"]) == "taken"  # not answered yet: nothing to send
    decision_id = ask_and_deny(people, client, hook.url)
    # Closed by the previous release: its webhook untracked, its job queued as that release
    # queued it (no attempt).
    Decision.objects.filter(pk=decision_id).update(webhook_status="", webhook_due_at=None)
    django_rq.get_queue("default").empty()
    django_rq.get_queue("default").enqueue("runtime.jobs.notify_decision", decision_id)
    run_default_queue()
    assert len(hook.received) == 1
    assert webhook_of(client, decision_id)["status"] == "delivered"


def test_a_decision_answered_at_once_has_no_webhook_to_send(people, hook):
    agent, client = register(people)
    asked = client.post("/api/v1/agents/refund-agent/decisions",
                        {"action": "payments.refund", "amount": 20, "callback_url": hook.url},
                        format="json").json()
    assert asked["outcome"] == "allow"
    assert "webhook" not in client.get(f"/api/v1/decisions/{asked['id']}").json()
    run_default_queue()
    assert hook.received == []
