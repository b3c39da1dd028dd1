"""RQ entry points of the reconcile loop (thin: ids in, actions called). The pass's own job,
its lock and its requeues are the controller's (`reconciliation.controller`)."""

import importlib
import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from config import queues
from config.scheduled_time import not_before
from reconciliation import actions, fleet_snapshot, inbox, silence
from reconciliation.actions import inbox_notices, retention
from reconciliation.actions.retirement import stop_failed, stop_on_platform
from reconciliation.choices import Trigger
from reconciliation.connectors import ConnectorError
from reconciliation.controller import work_queue
from reconciliation.controller.backoff import backoff_seconds
from reconciliation.controller.handler import reconcile_agent as _reconcile_agent
from reconciliation.controller.triggers import enqueue_reconcile
from reconciliation.fleet_snapshot import backstop
from reconciliation.resync_query import needing_pass, reconcilable

log = logging.getLogger(__name__)
# Passes queued by the previous release are stored as "reconciliation.jobs.reconcile_agent".
reconcile_agent = _reconcile_agent


def _queue():
    return work_queue.queue()




def enforce_retention() -> dict[str, object]:
    """Cron: make the coming days' partitions, then let go of data past its retention
    (reconciliation/actions/retention.py); what was created and how many rows went."""
    created = retention.make_partitions() if retention.partitioned() else []
    return {"created": created, "gone": retention.apply_retention()}


RESYNC_BATCH = 5000


def resync() -> int:
    """The periodic backstop (cron): split every reconcilable agent into ranges of ids, one
    batch job each; returns the number of batch jobs queued. A batch is one set-based query."""
    ids = list(reconcilable().order_by("pk").values_list("pk", flat=True))
    queue = _queue()
    bounds = [(ids[i], ids[min(i + RESYNC_BATCH, len(ids)) - 1])
              for i in range(0, len(ids), RESYNC_BATCH)]
    with queue.connection.pipeline() as pipe:
        for first, last in bounds:
            queue.enqueue(resync_range, first, last, pipeline=pipe)
        pipe.execute()
    backstop()  # the fleet view, for what no trigger announced (a lifecycle change ...)
    return len(bounds)


def refresh_fleet_snapshot() -> dict[str, int]:
    """Recompute the fleet view the pages and APIs read (reconciliation/fleet_snapshot.py)."""
    fleet_snapshot.refresh_started()
    try:
        snapshot = fleet_snapshot.record_fleet_snapshot()
    finally:
        fleet_snapshot.refresh_ended()
    return {"agents": snapshot.fleet["agents"], "took_ms": snapshot.took_ms}


def resync_range(first_id: int, last_id: int) -> dict[str, int]:
    """Check the agents with ids in [first_id, last_id]; queue a full pass only for those
    that are not in sync."""
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
    return silence.find_silent_agents()


def inbox_sweep() -> dict[str, int]:
    """Cron (INBOX_SWEEP_SECONDS), and again at the earliest coming deadline so a breach is
    noticed when it happens: notice new items and breaches, send what is due."""
    now = timezone.now()
    done = inbox_notices.sweep(now)
    # Deadlines after `now` (not after the sweep ended): one passing during the sweep is
    # scheduled too, and then runs at once.
    coming = [e.deadline for e in inbox.queue_for(None, now) if e.deadline > now]
    if coming:
        when = not_before(min(coming) + timedelta(milliseconds=100))
        queues.queue("default").enqueue_at(
            when, inbox_sweep, job_id=f"inbox-sweep-{when:%Y%m%d%H%M%S}")
    return done


def stop_retired_agent(agent_id: int, attempt: int = 0) -> str:
    """Ask a retired agent's platform to stop it; a platform that cannot be reached is asked
    again with backoff (the same key: a repeat is a no-op there), and after
    RETIRE_STOP_MAX_RETRIES the approvers get an escalation to stop it by hand."""
    try:
        return stop_on_platform(agent_id)
    except ConnectorError as error:
        if attempt >= settings.RETIRE_STOP_MAX_RETRIES:
            stop_failed(agent_id, error=str(error), attempts=attempt + 1)
            return "escalated"
        delay = backoff_seconds(attempt + 1)
        work_queue.queue().enqueue_in(timedelta(seconds=delay), stop_retired_agent, agent_id,
                            attempt + 1)
        return f"retry in {delay:.1f}s"


# Jobs that moved to the app that owns them. A job the previous release queued or scheduled
# still names this module in Redis; RQ finds it here by name (not imported: runtime and sandbox
# sit above reconciliation). Drop an entry once no release that queued it is deployed.
MOVED_JOBS = {
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
