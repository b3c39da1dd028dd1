"""RQ entry points of the reconcile loop (thin: ids in, actions called).

One pass per agent at a time: a Redis lock with an expiry (its keys and scripts live in
`work_queue`), so a dead worker's lock lapses and another worker finishes the work. Failures
requeue with exponential backoff and jitter, like the controller-runtime work queue.
"""

import importlib
import logging
import random
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from audit.context import request_id_scope
from config.scheduled_time import not_before
from config.times import parse_timestamp
from reconciliation import actions, work_queue
from reconciliation.choices import Trigger
from reconciliation.connectors import ConnectorError
from reconciliation.triggers import enqueue_reconcile

# Passes a holder runs back to back for triggers that arrived during its own, at most.
FOLLOW_UPS = 3
log = logging.getLogger(__name__)


def _queue():
    return work_queue.queue()


def backoff_seconds(attempt: int) -> float:
    """Exponential backoff with full jitter: 1, 2, 4 ... capped at 5 minutes."""
    # Rescheduled, not tenacity (config/retries.py): the worker is freed between tries and the
    # job carries its attempt number, so that after N the pass fails or a human is asked.
    return random.uniform(0.5, 1.0) * min(300, 2 ** max(0, attempt - 1))  # noqa: S311


def reconcile_agent(agent_id: int, trigger: str, attempt: int = 0, queued: str = "") -> str:
    """Run one pass for an agent, holding its lock; requeue on failure or contention.

    `queued` is the token of the waiting-pass key this job owns (see `enqueue_reconcile`):
    while the lock is busy the key stays set, so further triggers collapse into this job."""
    queue = _queue()
    connection = queue.connection
    if queued and work_queue.was_taken(connection, queued):
        return "collapsed"  # the lock's holder ran this pass right after its own
    token = uuid.uuid4().hex
    if not work_queue.acquire_lock(connection, agent_id, token, settings.RECONCILE_LOCK_SECONDS):
        # Another worker is reconciling this agent: come back once it is likely done.
        if queued:
            work_queue.keep_waiting(connection, agent_id)
        queue.enqueue_in(timedelta(seconds=1 + random.random()), reconcile_agent, agent_id,
                         trigger, attempt, queued=queued)
        return "busy"
    if queued:  # from here on a new trigger must queue a new pass: this one reads state now
        work_queue.release_waiting(connection, agent_id, trigger, queued)
    if trigger == Trigger.VERIFY:  # likewise: this pass may need to schedule the next one
        work_queue.clear_verify(connection, agent_id)
    try:
        if queued and work_queue.was_taken(connection, queued):
            return "collapsed"  # taken over between the check above and the lock
        with request_id_scope(f"reconcile-{agent_id}-{token[:8]}"), work_queue.held_lock(
                connection, agent_id, token, settings.RECONCILE_LOCK_SECONDS):
            run = actions.reconcile_agent(agent_id, trigger=trigger)
            for _ in range(FOLLOW_UPS):
                waiting = work_queue.take_waiting(connection, agent_id)
                if waiting is None:
                    break
                run = actions.reconcile_agent(agent_id, trigger=waiting)
        return run.result if run else "skipped"
    except work_queue.LockLost as lost:
        # Another worker holds the agent now; its pass decides afresh and finishes the work
        # (each change is idempotent by its key). Nothing to retry here.
        log.error("reconcile of agent %s stopped before its next change: %s", agent_id, lost)
        return "lock lost"
    except ConnectorError as error:
        if attempt >= settings.RECONCILE_MAX_RETRIES:
            log.error("reconcile of agent %s gave up after %s attempts: %s", agent_id,
                      attempt + 1, error)
            return "failed"
        delay = backoff_seconds(attempt + 1)
        queue.enqueue_in(timedelta(seconds=delay), reconcile_agent, agent_id, Trigger.RETRY,
                         attempt + 1)
        return f"retry in {delay:.1f}s"
    finally:
        work_queue.release_lock(connection, agent_id, token)


def schedule_verify(agent_id: int) -> None:
    """A verification pass a few seconds from now (at most one waiting per agent)."""
    queue = _queue()
    delay = settings.RECONCILE_VERIFY_DELAY_SECONDS
    if work_queue.claim_verify(queue.connection, agent_id, delay + work_queue.QUEUED_TTL):
        queue.enqueue_at(not_before(timezone.now() + timedelta(seconds=delay)), reconcile_agent,
                         agent_id, Trigger.VERIFY)


def schedule_grant_expiry(agent_id: int, expires_at: str) -> None:
    """A pass exactly when a grant expires, so it is revoked without any new proposal."""
    when = parse_timestamp(expires_at)
    if when > timezone.now():
        _queue().enqueue_at(not_before(when), reconcile_agent, agent_id, Trigger.GRANT_EXPIRED)


def enforce_retention() -> dict[str, object]:
    """Cron: make the coming days' partitions, then let go of data past its retention
    (reconciliation/actions/retention.py); what was created and how many rows went."""
    from reconciliation.actions import retention

    created = retention.make_partitions() if retention.partitioned() else []
    return {"created": created, "gone": retention.apply_retention()}


def schedule_pass_at(agent_id: int, when: datetime, trigger: str) -> None:
    """A pass at an exact future time (a waiver's end)."""
    if when > timezone.now():
        _queue().enqueue_at(not_before(when), reconcile_agent, agent_id, trigger)


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


def wake_escalation_job(escalation_id: int) -> bool:
    """Scheduled at a snooze's end: tell the approvers' inboxes it is back."""
    return actions.announce_awake(escalation_id)


def find_silent_agents() -> dict[str, int]:
    """The silence check (cron, every SILENCE_CHECK_SECONDS)."""
    from reconciliation.silence import find_silent_agents as find

    return find()


# Jobs that moved to the app that owns them. A job the previous release queued or scheduled
# still names this module in Redis; RQ finds it here by name (not imported: runtime and sandbox
# sit above reconciliation). Drop an entry once no release that queued it is deployed.
MOVED_JOBS = {
    "stop_retired_agent": "registry.jobs",  # retries with backoff after a retirement
    "check_review": "registry.jobs",  # scheduled at a reminder or review date, weeks ahead
    "check_reviews": "registry.jobs",  # queued by the previous release's cron
    "record_violations": "runtime.jobs",  # waiting on the ingest queue with its retries
    "record_group_breach": "runtime.jobs",  # waiting on the ingest queue with its retries
    "lift_group_block_job": "runtime.jobs",  # scheduled at a block rule's window end
    "block_group_job": "runtime.jobs",  # waiting on the ingest queue
    "expire_decision_job": "runtime.jobs",  # scheduled at a pending decision's expiry
    "expire_overdue_decisions": "runtime.jobs",  # queued by the previous release's cron
    "notify_decision": "runtime.jobs",  # a webhook call and its scheduled retries
    "recount_events": "runtime.jobs",  # queued by the previous release's cron
    "simulate_drift": "sandbox.jobs",  # queued by the previous release's cron (the demo)
}


def __getattr__(name: str):
    """The moved job `name`, for a job queued under this module's path (PEP 562)."""
    if name in MOVED_JOBS:
        return getattr(importlib.import_module(MOVED_JOBS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
