"""A decided decision's POST to the agent's webhook (`callback_url`), delivered at least once.

The webhook turns pending in the transaction that decides the decision, and its first
attempt is queued when that commits. Each attempt is claimed before it is sent (the decision
counts the attempts taken), so a copy of a job that was only late finds its attempt taken
and sends nothing; its outcome is recorded on the decision. An attempt Redis lost (a
failover, a restart from disk, a worker that died mid-send) is overdue after ATTEMPT_GRACE,
and the sweep (`resend_overdue`, cron) queues it again: a receiver can be sent one answer
twice, and tells by the decision's id. The sending itself is runtime/jobs.notify_decision's.
"""

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from config import queues
from reconciliation.choices import DecisionStatus, WebhookStatus
from reconciliation.controller.backoff import backoff_seconds
from runtime.models import Decision

ATTEMPTS = 5  # the first, and four more after a backoff
# How long an attempt may take before the sweep takes it for lost: the send's own timeout
# (5 s), with room for a default queue that is behind.
ATTEMPT_GRACE = timedelta(minutes=2)
JOB = "runtime.jobs.notify_decision"


def send_when_decided(decision: Decision, now: datetime) -> None:
    """In the transaction that decides `decision`, before it is saved: its webhook, if it has
    one, is pending, and its first attempt is queued once that commits."""
    if not decision.callback_url:
        return
    decision.webhook_status = WebhookStatus.PENDING
    decision.webhook_attempts, decision.webhook_error = 0, ""
    decision.webhook_due_at = now + ATTEMPT_GRACE
    _queue_on_commit(str(decision.pk), 0)


def _queue_on_commit(decision_id: str, attempt: int, delay: float = 0) -> None:
    def enqueue() -> None:
        queue = queues.queue("default")
        if delay:
            queue.enqueue_in(timedelta(seconds=delay), JOB, decision_id, attempt)
        else:
            queue.enqueue(JOB, decision_id, attempt)

    # robust: with Redis down the decision stands, and the sweep sends its webhook later
    transaction.on_commit(enqueue, robust=True)


def claim(decision_id: str, attempt: int) -> Decision | None:
    """Take attempt `attempt` (from 0) of the decision's webhook; None when it is no longer
    pending or that attempt was taken (the sweep's copy of a job that was only late). A job
    the previous release queued finds its decision's webhook untracked, and takes it too."""
    due = timezone.now() + ATTEMPT_GRACE
    untracked = (Q(webhook_status=WebhookStatus.NONE, webhook_attempts=0) & ~Q(callback_url="")
                 & ~Q(status=DecisionStatus.PENDING))  # answered: nothing to send before
    taken = Decision.objects.filter(
        Q(webhook_status=WebhookStatus.PENDING, webhook_attempts=attempt) | untracked,
        pk=decision_id).update(webhook_status=WebhookStatus.PENDING,
                               webhook_attempts=attempt + 1, webhook_due_at=due)
    if not taken:
        return None
    return Decision.objects.select_related("agent", "decided_by").get(pk=decision_id)


def settle(decision_id: str, attempt: int, status: str, error: str = "") -> bool:
    """The outcome of attempt `attempt`, once it is known: delivered, refused, not allowed, or
    failed. False when a later attempt has taken the webhook over."""
    return bool(Decision.objects.filter(
        pk=decision_id, webhook_status=WebhookStatus.PENDING, webhook_attempts=attempt + 1,
    ).update(webhook_status=status, webhook_due_at=None, webhook_error=error[:300]))


def retry_later(decision_id: str, attempt: int, error: str) -> float | None:
    """Attempt `attempt` failed (unreachable, 5xx, 429): the next after a backoff, or failed
    once the attempts are spent (None). Returns the delay in seconds."""
    if attempt + 1 >= ATTEMPTS:
        settle(decision_id, attempt, WebhookStatus.FAILED, error)
        return None
    delay = backoff_seconds(attempt + 1)
    with transaction.atomic():
        if Decision.objects.filter(
                pk=decision_id, webhook_status=WebhookStatus.PENDING,
                webhook_attempts=attempt + 1).update(
                webhook_due_at=timezone.now() + timedelta(seconds=delay) + ATTEMPT_GRACE,
                webhook_error=error[:300]):
            _queue_on_commit(decision_id, attempt + 1, delay)
    return delay


def resend_overdue(now: datetime | None = None, limit: int = 500) -> int:
    """Cron: queue again each pending webhook whose attempt is overdue (its job lost, or its
    worker died while sending), as its next attempt; one whose attempts are spent fails.
    Returns how many were queued or failed."""
    now = now or timezone.now()
    overdue = list(Decision.objects.filter(webhook_status=WebhookStatus.PENDING,
                                           webhook_due_at__lt=now)
                   .order_by("webhook_due_at")
                   .values_list("pk", "webhook_attempts", "webhook_due_at")[:limit])
    for pk, attempts, due in overdue:
        with transaction.atomic():
            mine = Decision.objects.filter(pk=pk, webhook_status=WebhookStatus.PENDING,
                                           webhook_attempts=attempts, webhook_due_at=due)
            if attempts >= ATTEMPTS:
                mine.update(webhook_status=WebhookStatus.FAILED, webhook_due_at=None,
                            webhook_error="its last attempt never finished")
            elif mine.update(webhook_due_at=now + ATTEMPT_GRACE):
                _queue_on_commit(str(pk), attempts)
    return len(overdue)
