"""Thin RQ entry points of the registry: the inbox sweep (notifications and SLA breaches)."""

from datetime import timedelta

import django_rq
from django.utils import timezone

from config.scheduled_time import not_before


def inbox_sweep() -> dict[str, int]:
    """Cron (INBOX_SWEEP_SECONDS), and again at the earliest coming deadline so a breach is
    noticed when it happens: notice new items and breaches, send what is due."""
    from registry import inbox
    from registry.actions.notifications import sweep

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
