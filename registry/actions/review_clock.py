"""The review clock an approval starts (in its transaction): the agent's next review date,
and for a recertification the overdue state cleared; the reminder and the overdue check
scheduled at their exact times. Proposals start it on activation; recertification reads its
dates (it imports proposals, which import this module)."""

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config import queues
from config.scheduled_time import not_before
from registry import holds, signals
from registry.choices import Lifecycle, OverdueEffect
from registry.desired_push import announce_desired_change
from registry.models import Agent, DesiredStateVersion
from registry.recertification import review_date
from registry.signals import announce


def iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when else None


def remind_at(due: datetime) -> datetime:
    """When the owner is reminded of a review date."""
    return due - timedelta(days=settings.RECERT_REMIND_DAYS)


def start_review_clock(version: DesiredStateVersion, agent: Agent, *, actor: Any,
                       now: datetime) -> None:
    """On activation (in its transaction): the new review date (audited), and, for a
    recertification only, the overdue state cleared (condition, escalation, restriction, a
    suspension it caused). Any other approved change leaves an overdue agent overdue: a
    version bump is not a review of what the agent may do."""
    before = {"review_due_at": iso(agent.review_due_at), "overdue": agent.overdue_at is not None}
    if agent.overdue_at is not None and not version.recertifies:
        audit.record(actor=actor, action=AuditAction.REVIEW_DATE_SET,
                     target=f"agent:{agent.name}", agent=agent.name, before=before,
                     after=before, reason=f"proposal {version.pk} is not a recertification: "
                                          "the agent stays overdue until it is recertified")
        return
    due, level = review_date(version.spec, now, after_seconds=version.review_after_seconds,
                             by=version.review_by)
    was_overdue, restricted = agent.overdue_at is not None, agent.restricted_to is not None
    effect = agent.overdue_effect
    Agent.objects.filter(pk=agent.pk).update(review_due_at=due, reminded_at=None,
                                             overdue_at=None, restricted_to=None,
                                             overdue_effect="")
    agent.review_due_at, agent.reminded_at, agent.overdue_at, agent.restricted_to = (
        due, None, None, None)
    announce_desired_change(agent.name)
    agent.overdue_effect = ""
    if version.recertifies:
        audit.record(actor=actor, action=AuditAction.AGENT_RECERTIFIED,
                     target=f"agent:{agent.name}", agent=agent.name, before=before,
                     after={"review_due_at": iso(due), "from": level,
                            "proposal": version.pk, "lifted_restriction": restricted},
                     reason=version.comment or f"recertified by proposal {version.pk}")
    else:
        audit.record(actor=actor, action=AuditAction.REVIEW_DATE_SET,
                     target=f"agent:{agent.name}", agent=agent.name, before=before,
                     after={"review_due_at": iso(due), "from": level, "proposal": version.pk},
                     reason=f"review date of generation {version.generation}"
                            + (" set by its proposer" if level == "override" else
                               f" from the {level} risk interval"))
    if was_overdue:
        _close_recertification_escalations(agent, actor=actor, version=version, now=now)
        _resume_if_overdue_suspended(agent, actor=actor, version=version, effect=effect)
    refresh_condition(agent, now)
    _schedule_review_jobs(agent.pk, due)


def _close_recertification_escalations(agent: Agent, *, actor: Any,
                                       version: DesiredStateVersion, now: datetime) -> None:
    """The loop resolves the agent's open recertification escalations (audited)."""
    announce(signals.recertified, agent=agent, actor=actor, version=version, now=now)


def _resume_if_overdue_suspended(agent: Agent, *, actor: Any, version: DesiredStateVersion,
                                 effect: str) -> None:
    """A suspension the overdue review caused ends with the recertification; one a human or
    the reconciler chose for another reason stays."""
    if agent.lifecycle != Lifecycle.SUSPENDED or effect != OverdueEffect.SUSPEND:
        return
    if holds.held_by_stop(agent):  # a stop holds it until two people lift it
        return
    Agent.objects.filter(pk=agent.pk).update(lifecycle=Lifecycle.ACTIVE,
                                             updated_at=timezone.now())
    agent.lifecycle = Lifecycle.ACTIVE
    announce_desired_change(agent.name)
    announce(signals.fleet_changed)  # the fleet view's compliance timeline shows suspensions
    audit.record(actor=actor, action=AuditAction.AGENT_RESUMED, target=f"agent:{agent.name}",
                 agent=agent.name, before={"lifecycle": "suspended"},
                 after={"lifecycle": "active"},
                 reason=f"recertified by proposal {version.pk}; its overdue suspension ends")


def refresh_condition(agent: Agent, now: datetime) -> None:
    """The loop writes the Recertified condition on the agent's status, now (the page reads
    it at once)."""
    announce(signals.review_changed, agent=agent, now=now)


def _schedule_review_jobs(agent_id: int, due: datetime) -> None:
    """After commit: the reminder and the overdue check at their exact times, on the default
    queue (the reconcile queue holds passes only, one per agent). The job is named by its
    dotted path: registry/jobs.py imports this module."""

    def schedule() -> None:
        now, queue = timezone.now(), queues.queue("default")
        for when in (remind_at(due), due):
            if when > now:
                queue.enqueue_at(not_before(when), "registry.jobs.check_review", agent_id)
            else:
                queue.enqueue("registry.jobs.check_review", agent_id)

    transaction.on_commit(schedule, robust=True)
