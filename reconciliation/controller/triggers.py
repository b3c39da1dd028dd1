"""Asking for a reconcile pass: after commit, and at most one queued pass per agent."""

import uuid
from datetime import datetime

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


def schedule_grant_expiries(agent_id: int, spec: dict) -> None:
    """After commit, a pass at each grant's exact expiry time."""

    def schedule() -> None:
        # cycle: reconciliation.controller.handler imports this module
        from reconciliation.controller.handler import schedule_grant_expiry

        for grant in spec.get("grants", []):
            schedule_grant_expiry(agent_id, grant["expires_at"])

    transaction.on_commit(schedule, robust=True)


def schedule_pass_at_commit(agent_id: int, when: datetime, trigger: str) -> None:
    """After commit, a pass exactly at `when` (a waiver's or a shadow's end)."""

    def schedule() -> None:
        # cycle: reconciliation.controller.handler imports this module
        from reconciliation.controller.handler import schedule_pass_at

        schedule_pass_at(agent_id, when, trigger)

    transaction.on_commit(schedule, robust=True)


def schedule_waiver_lapse(agent_id: int, when: datetime) -> None:
    """After commit, a pass exactly when a waiver ends, so the agent is enforced again."""

    def schedule() -> None:
        # cycle: reconciliation.controller.handler imports this module
        from reconciliation.controller.handler import schedule_pass_at

        schedule_pass_at(agent_id, when, "waiver_lapsed")

    transaction.on_commit(schedule, robust=True)
