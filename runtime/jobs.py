"""Thin RQ entry points of the runtime: broken rules and group breaches on the ingest
workers, group blocks lifted, pending decisions expired, decision webhooks called, the event
outbox recounted. The actions queue them by dotted path ("runtime.jobs.notify_decision"), so
they need not import this module, which imports them."""

import json
import logging
import time
from datetime import timedelta
from urllib.parse import quote, urlsplit

from django.conf import settings
from rq.timeouts import JobTimeoutException

from config import outbound, queues
from config.scheduled_time import not_before
from reconciliation.choices import WebhookStatus
from reconciliation.webhooks import SIGNATURE_HEADER, signature
from runtime import event_store
from runtime.actions import behaviour, decisions, group_blocks, group_rules, webhooks

log = logging.getLogger(__name__)


def record_group_breach(hit: dict, held: list | None = None) -> bool:
    """Ingest worker: the breach, a finding per agent involved, one escalation; then the
    outbox rows of the batches it came from (`held`) are told it ran."""
    recorded = group_rules.record_group_breach(hit, held) is not None
    event_store.jobs_finished(held or [])
    return recorded


def lift_group_block_job(breach_id: int) -> bool:
    """Scheduled when a block rule's window can have fallen back under its limit."""
    return group_blocks.lift_group_block(breach_id)


def lift_overdue_group_blocks() -> int:
    """Cron: group blocks whose window fell back, their scheduled look lost or not."""
    return group_blocks.lift_overdue_group_blocks()


def block_group_job(breach_id: int, finding_ids: list[int], held: list | None = None) -> None:
    """Ingest worker, after a block rule's breach committed: block each agent involved; then
    the outbox rows of the batches the breach came from (`held`) are told it ran."""
    group_blocks.block_involved(breach_id, finding_ids)
    event_store.jobs_finished(held or [])


def record_violations(agent_id: int, violations: list[dict], held: list | None = None) -> int:
    """Ingest worker: findings and enforcement for broken rules; then the outbox rows of the
    batches they came from (`held`) are told it ran."""
    recorded = len(behaviour.record_violations(agent_id, violations))
    event_store.jobs_finished(held or [])
    return recorded


def record_violations_of(found: dict[int, list[dict]], held: list | None = None) -> int:
    """Ingest worker: record_violations for each agent of a batch, each on its own. An agent
    whose recording fails (its platform refused the suspension) gets a job of its own with
    the ingest job's retries, so it neither stops the others nor has them recorded again; a
    job that runs out of time stops there (RQ retries it whole: recording is idempotent).
    Then the outbox rows of the batches they came from (`held`) are told it ran (a requeued
    agent's job answers for them on its own)."""
    recorded = 0
    for agent_id, violations in found.items():
        try:
            recorded += len(behaviour.record_violations(agent_id, violations))
        except JobTimeoutException:
            raise
        except Exception:  # noqa: BLE001 - retried on its own, below
            log.exception("recording agent %s's broken rules failed; retried in a job of its "
                          "own", agent_id)
            behaviour.requeue_violations(agent_id, violations, held)
    event_store.jobs_finished(held or [])
    return recorded


def expire_decision_job(decision_id: str) -> bool:
    """Scheduled at a pending decision's expiry time; runs again if it ran early."""
    if decisions.expire_decision(decision_id):
        return True
    # Not due yet (the clock of the worker that ran it is behind): come back at the deadline.
    deadline = decisions.pending_deadline(decision_id)
    if deadline is not None:
        queues.queue("default").enqueue_at(
            not_before(deadline + timedelta(seconds=1)), expire_decision_job, decision_id)
    return False


def expire_overdue_decisions() -> int:
    """Cron: pending decisions whose scheduled expiry was lost (Redis down at the time)."""
    return decisions.expire_overdue_decisions()


def notify_decision(decision_id: str, attempt: int = 0) -> str:
    """POST the decision to the webhook the agent gave, signed: attempt `attempt`, claimed
    first (a copy of a late job sends nothing), its outcome recorded on the decision
    (runtime/actions/webhooks.py); a failure is retried with backoff."""
    decision = webhooks.claim(decision_id, attempt)
    if decision is None:
        return "taken"  # settled, or this attempt is another job's
    try:
        # Checked again at send time, on the address it resolves to now, which is the one
        # called: the allow-list may have shrunk, or the name may now point inside.
        destination = outbound.check(decision.callback_url, settings.DECISION_WEBHOOK_HOSTS)
    except outbound.Refused as error:
        log.warning("decision %s webhook not sent: %s", decision_id, error)
        webhooks.settle(decision_id, attempt, WebhookStatus.NOT_ALLOWED, str(error))
        return "not allowed"
    body = json.dumps(decision.to_dict()).encode()
    headers = {"Content-Type": "application/json"}
    if settings.DECISION_WEBHOOK_SECRET:
        headers[SIGNATURE_HEADER] = signature(body, settings.DECISION_WEBHOOK_SECRET,
                                              int(time.time()))
    query = urlsplit(decision.callback_url).query
    target = quote(destination.path, safe="/%") + (f"?{query}" if query else "")
    try:
        answer = outbound.send(destination, "POST", target, headers, body,
                               timeout=5, max_bytes=settings.OUTBOUND_MAX_ANSWER_BYTES)
    except OSError as error:
        return _retry_notify(decision_id, attempt, f"{type(error).__name__}: {error}")
    if answer.status >= 500 or answer.status == 429:
        return _retry_notify(decision_id, attempt, f"answered {answer.status}")
    if answer.status >= 300:  # a redirect (never followed: it could point anywhere) or refusal
        log.warning("decision %s webhook answered %s; not retried", decision_id, answer.status)
        webhooks.settle(decision_id, attempt, WebhookStatus.REFUSED,
                        f"answered {answer.status}")
        return f"refused {answer.status}"
    webhooks.settle(decision_id, attempt, WebhookStatus.DELIVERED)
    return f"delivered {answer.status}"


def _retry_notify(decision_id: str, attempt: int, error: str) -> str:
    delay = webhooks.retry_later(decision_id, attempt, error)
    if delay is None:
        log.warning("decision %s webhook failed: %s", decision_id, error)
        return "gave up"
    return "retrying"


def resend_overdue_webhooks() -> int:
    """Cron: decision webhooks whose attempt was lost with its job, sent again."""
    return webhooks.resend_overdue()


def recount_events() -> int:
    """Cron: drain the event outbox (rules for events stored but not counted: Redis was down,
    or a web process died between commit and counting)."""
    return behaviour.recount_events(settled_seconds=10)
