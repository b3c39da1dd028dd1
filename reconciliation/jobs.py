"""RQ entry points of the reconcile loop (thin: ids in, actions called). The pass's own job,
its lock and its requeues are the controller's (`reconciliation.controller`)."""

import logging
import time
from datetime import datetime, timedelta
from urllib.parse import quote, urlsplit

import django_rq
from django.conf import settings
from django.utils import timezone

from config.scheduled_time import not_before
from reconciliation import actions
from reconciliation.choices import Trigger
from reconciliation.connectors import ConnectorError
from reconciliation.controller import work_queue
from reconciliation.controller.backoff import backoff_seconds
from reconciliation.controller.handler import reconcile_agent as _reconcile_agent
from reconciliation.controller.triggers import enqueue_reconcile

log = logging.getLogger(__name__)
# Passes queued by the previous release are stored as "reconciliation.jobs.reconcile_agent".
reconcile_agent = _reconcile_agent


def _queue():
    return work_queue.queue()


def stop_retired_agent(agent_id: int, attempt: int = 0) -> str:
    """Ask a retired agent's platform to stop it; a platform that cannot be reached is asked
    again with backoff (the same key: a repeat is a no-op there), and after
    RETIRE_STOP_MAX_RETRIES the approvers get an escalation to stop it by hand."""
    from registry.actions.retirement import stop_failed, stop_on_platform

    try:
        return stop_on_platform(agent_id)
    except ConnectorError as error:
        if attempt >= settings.RETIRE_STOP_MAX_RETRIES:
            stop_failed(agent_id, error=str(error), attempts=attempt + 1)
            return "escalated"
        delay = backoff_seconds(attempt + 1)
        _queue().enqueue_in(timedelta(seconds=delay), stop_retired_agent, agent_id,
                            attempt + 1)
        return f"retry in {delay:.1f}s"


def schedule_review_checks(agent_id: int, times: list[datetime]) -> None:
    """A review check at each of these times (the reminder, the review date), on the default
    queue: the reconcile queue holds passes only, one per agent."""
    now, queue = timezone.now(), django_rq.get_queue("default", commit_mode="auto")
    for when in times:
        if when > now:
            queue.enqueue_at(not_before(when), check_review, agent_id)
        else:
            queue.enqueue(check_review, agent_id)


def check_review(agent_id: int) -> str:
    """Remind the owner or mark the agent overdue, whichever is due now (no-op otherwise)."""
    from registry.actions.recertification import mark_overdue, remind_owner

    reminded = remind_owner(agent_id)
    overdue = mark_overdue(agent_id)
    return "overdue" if overdue else "reminded" if reminded else "nothing due"


def check_reviews() -> dict[str, int]:
    """Cron backstop: every agent whose reminder or review date came and was not acted on (an
    exact-time job lost while Redis was down, a changed interval)."""
    from registry.actions.recertification import due_agent_ids, mark_overdue, remind_owner

    remind, overdue = due_agent_ids(timezone.now())
    return {"reminded": sum(remind_owner(pk) for pk in remind),
            "overdue": sum(mark_overdue(pk) for pk in overdue)}


def enforce_retention() -> dict[str, object]:
    """Cron: make the coming days' partitions, then let go of data past its retention
    (reconciliation/actions/retention.py); what was created and how many rows went."""
    from reconciliation.actions import retention

    created = retention.make_partitions() if retention.partitioned() else []
    return {"created": created, "gone": retention.apply_retention()}


RESYNC_BATCH = 5000


def resync() -> int:
    """The periodic backstop (cron): split every reconcilable agent into ranges of ids, one
    batch job each; returns the number of batch jobs queued. A batch is one set-based query."""
    from reconciliation.resync_query import reconcilable

    ids = list(reconcilable().order_by("pk").values_list("pk", flat=True))
    queue = _queue()
    bounds = [(ids[i], ids[min(i + RESYNC_BATCH, len(ids)) - 1])
              for i in range(0, len(ids), RESYNC_BATCH)]
    with queue.connection.pipeline() as pipe:
        for first, last in bounds:
            queue.enqueue(resync_range, first, last, pipeline=pipe)
        pipe.execute()
    from reconciliation.fleet_snapshot import backstop

    backstop()  # the fleet view, for what no trigger announced (a lifecycle change ...)
    return len(bounds)


def refresh_fleet_snapshot() -> dict[str, int]:
    """Recompute the fleet view the pages and APIs read (reconciliation/fleet_snapshot.py)."""
    from reconciliation import fleet_snapshot

    fleet_snapshot.refresh_started()
    try:
        snapshot = fleet_snapshot.record_fleet_snapshot()
    finally:
        fleet_snapshot.refresh_ended()
    return {"agents": snapshot.fleet["agents"], "took_ms": snapshot.took_ms}


def resync_range(first_id: int, last_id: int) -> dict[str, int]:
    """Check the agents with ids in [first_id, last_id]; queue a full pass only for those
    that are not in sync."""
    from reconciliation.resync_query import needing_pass, reconcilable

    needs_pass = needing_pass(reconcilable().filter(pk__gte=first_id, pk__lte=last_id),
                              timezone.now())
    queued = sum(enqueue_reconcile(agent_id, Trigger.RESYNC) for agent_id in needs_pass)
    return {"needs_pass": len(needs_pass), "queued": queued}


def resync_batch(agent_ids: list[int]) -> dict[str, int]:
    """Check a list of agents (jobs queued before resync took ranges still run)."""
    needs_pass = actions.converged_check(agent_ids)
    queued = sum(enqueue_reconcile(agent_id, Trigger.RESYNC) for agent_id in needs_pass)
    return {"checked": len(agent_ids), "queued": queued}


def record_violations_jobs(found: dict[int, list[dict]]) -> None:
    """Queue broken rules for the ingest workers: a job per agent, all in one round trip."""
    from rq import Queue, Retry

    from runtime.windows import connection

    retry = Retry(max=5, interval=[1, 2, 5, 15, 60])
    queue = django_rq.get_queue("ingest", commit_mode="auto", connection=connection())
    queue.enqueue_many([Queue.prepare_data(record_violations, (agent_id, violations),
                                           retry=retry)
                        for agent_id, violations in found.items()])


def record_group_breach_job(hit: dict) -> None:
    """Queue a group window over its limit for the ingest workers."""
    from rq import Retry

    django_rq.get_queue("ingest", commit_mode="auto").enqueue(
        record_group_breach, hit, retry=Retry(max=5, interval=[1, 2, 5, 15, 60]))


def record_group_breach(hit: dict) -> bool:
    """Ingest worker: the breach, a finding per agent involved, one escalation."""
    from runtime.actions.group_rules import record_group_breach as record

    return record(hit) is not None


def lift_group_block_job(breach_id: int) -> bool:
    """Scheduled when a block rule's window can have fallen back under its limit."""
    from runtime.actions.group_blocks import lift_group_block

    return lift_group_block(breach_id)


def block_group_job(breach_id: int, finding_ids: list[int]) -> None:
    """Ingest worker, after a block rule's breach committed: block each agent involved."""
    from runtime.actions.group_blocks import block_involved

    block_involved(breach_id, finding_ids)


def record_violations(agent_id: int, violations: list[dict]) -> int:
    """Ingest worker: findings and enforcement for broken rules."""
    from runtime.actions.behaviour import record_violations as record

    return len(record(agent_id, violations))


def expire_decision_job(decision_id: str) -> bool:
    """Scheduled at a pending decision's expiry time; runs again if it ran early."""
    from runtime.actions.decisions import expire_decision, pending_deadline

    if expire_decision(decision_id):
        return True
    # Not due yet (the clock of the worker that ran it is behind): come back at the deadline.
    deadline = pending_deadline(decision_id)
    if deadline is not None:
        django_rq.get_queue("default", commit_mode="auto").enqueue_at(
            not_before(deadline + timedelta(seconds=1)), expire_decision_job, decision_id)
    return False


def expire_overdue_decisions() -> int:
    """Cron: pending decisions whose scheduled expiry was lost (Redis down at the time)."""
    from runtime.actions.decisions import expire_overdue_decisions as expire

    return expire()


def wake_escalation_job(escalation_id: int) -> bool:
    """Scheduled at a snooze's end: tell the approvers' inboxes it is back."""
    return actions.announce_awake(escalation_id)


def notify_decision_job(decision_id: str) -> None:
    """Queue the call to the agent's webhook."""
    django_rq.get_queue("default", commit_mode="auto").enqueue(notify_decision, decision_id)


def notify_decision(decision_id: str, attempt: int = 0) -> str:
    """POST the decision to the webhook the agent gave, signed; retried with backoff."""
    import json

    from config import outbound
    from reconciliation.models import Decision
    from reconciliation.webhooks import SIGNATURE_HEADER, signature

    decision = Decision.objects.select_related("agent", "decided_by").get(pk=decision_id)
    try:
        # Checked again at send time, on the address it resolves to now, which is the one
        # called: the allow-list may have shrunk, or the name may now point inside.
        destination = outbound.check(decision.callback_url, settings.DECISION_WEBHOOK_HOSTS)
    except outbound.Refused as error:
        log.warning("decision %s webhook not sent: %s", decision_id, error)
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
        return _retry_notify(decision_id, attempt, error)
    if answer.status >= 500 or answer.status == 429:
        return _retry_notify(decision_id, attempt, OSError(f"answered {answer.status}"))
    if answer.status >= 300:  # a redirect (never followed: it could point anywhere) or refusal
        log.warning("decision %s webhook answered %s; not retried", decision_id, answer.status)
        return f"refused {answer.status}"
    return f"delivered {answer.status}"


def _retry_notify(decision_id: str, attempt: int, error: OSError) -> str:
    if attempt >= 4:
        log.warning("decision %s webhook failed: %s", decision_id, error)
        return "gave up"
    django_rq.get_queue("default", commit_mode="auto").enqueue_in(
        timedelta(seconds=backoff_seconds(attempt + 1)), notify_decision, decision_id,
        attempt + 1)
    return "retrying"


def simulate_drift() -> str:
    """The demo simulator's tick (registered by config.cron only when DEMO_SIMULATOR is on)."""
    from sandbox.lab import simulate

    return simulate()


def recount_events() -> int:
    """Cron: drain the event outbox (rules for events stored but not counted: Redis was down,
    or a web process died between commit and counting)."""
    from runtime.actions.behaviour import recount_events as recount

    return recount(settled_seconds=10)


def find_silent_agents() -> dict[str, int]:
    """The silence check (cron, every SILENCE_CHECK_SECONDS)."""
    from reconciliation.silence import find_silent_agents as find

    return find()
