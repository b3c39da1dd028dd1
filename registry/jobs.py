"""Thin RQ entry points of the registry: the inbox sweep (notifications and SLA breaches) and
review checks (recertification). Stopping a retired agent on its platform is the loop's
(reconciliation.jobs.stop_retired_agent)."""

from datetime import datetime, timedelta

import django_rq
from django.utils import timezone

from config.scheduled_time import not_before
from registry import inbox
from registry.actions.notifications import sweep
from registry.actions.recertification import due_agent_ids, mark_overdue, remind_owner


def inbox_sweep() -> dict[str, int]:
    """Cron (INBOX_SWEEP_SECONDS), and again at the earliest coming deadline so a breach is
    noticed when it happens: notice new items and breaches, send what is due."""
    now = timezone.now()
    done = sweep(now)
    # Deadlines after `now` (not after the sweep ended): one passing during the sweep is
    # scheduled too, and then runs at once.
    coming = [e.deadline for e in inbox.queue_for(None, now) if e.deadline > now]
    if coming:
        when = not_before(min(coming) + timedelta(milliseconds=100))
        django_rq.get_queue("default", commit_mode="auto").enqueue_at(
            when, inbox_sweep, job_id=f"inbox-sweep-{when:%Y%m%d%H%M%S}")
    return done


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
    reminded = remind_owner(agent_id)
    overdue = mark_overdue(agent_id)
    return "overdue" if overdue else "reminded" if reminded else "nothing due"


def check_reviews() -> dict[str, int]:
    """Cron backstop: every agent whose reminder or review date came and was not acted on (an
    exact-time job lost while Redis was down, a changed interval)."""
    remind, overdue = due_agent_ids(timezone.now())
    return {"reminded": sum(remind_owner(pk) for pk in remind),
            "overdue": sum(mark_overdue(pk) for pk in overdue)}
