"""Asking for a reconcile pass: after commit, and at most one queued pass per agent.

A change asks for a pass now, never for one later: what must happen at a later time (a
grant's end, a waiver's lapse, a shadow's end) that pass returns as `requeue_after`, and the
controller's `handler.requeue` schedules it."""

import uuid

from django.db import transaction

from reconciliation.controller import work_queue


def enqueue_reconcile(agent_id: int, trigger: str) -> bool:
    """Queue a pass unless one is already waiting for this agent; True when queued.

    The queued key names the waiting job ("<trigger> <token>"). It stays set while that job
    waits, including while it waits for a running pass's lock, and only the job holding the
    token clears it, once it holds the lock: so triggers arriving during a running pass
    collapse into one pass after it, as in controller-runtime's work queue."""
    queue = work_queue.queue()
    token = uuid.uuid4().hex[:12]
    if not work_queue.claim_waiting(queue.connection, agent_id, trigger, token):
        return False  # triggers for an agent already queued collapse into that pass
    queue.enqueue("reconciliation.jobs.reconcile_agent", agent_id, trigger,
                  job_id=f"reconcile-{agent_id}-{token}", queued=token)
    return True


def request_reconcile(agent_id: int, trigger: str) -> None:
    """Queue a pass once the current transaction commits (never for a rolled-back change)."""
    # robust: with Redis down the change still stands; the periodic resync re-derives the pass.
    transaction.on_commit(lambda: enqueue_reconcile(agent_id, trigger), robust=True)
