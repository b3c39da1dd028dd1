"""Recertification: every approved desired state is reviewed again by a date. The owner is
reminded before it; at it the agent shows Recertified=False, an escalation opens for its
approvers and the guardrails decide what it gets (warn, restrict, suspend). Recertifying is a
proposal of the active spec that needs the usual approvals and resets the date."""

from datetime import datetime, timedelta
from typing import Any

import django_rq
from django.conf import settings
from django.db import transaction
from django.utils import timezone

import audit
from audit.actions import actor_label
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from config.scheduled_time import not_before
from registry import holds, signals
from registry.actions.proposals import ProposalOutcome, check_can_propose, propose
from registry.choices import Lifecycle, OverdueEffect, RiskLevel, Role, VersionSource, VersionState
from registry.desired_push import announce_desired_change
from registry.models import Agent, DesiredStateVersion, Guardrail, ReviewInterval
from registry.principals import AgentPrincipal
from registry.recertification import (
    ReviewOverride,
    format_seconds,
    intervals,
    overdue_effect,
    review_date,
)
from registry.roles import has_role
from registry.signals import announce

SYSTEM = "system:recertification"


def _iso(when: datetime | None) -> str | None:
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
    before = {"review_due_at": _iso(agent.review_due_at), "overdue": agent.overdue_at is not None}
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
                     after={"review_due_at": _iso(due), "from": level,
                            "proposal": version.pk, "lifted_restriction": restricted},
                     reason=version.comment or f"recertified by proposal {version.pk}")
    else:
        audit.record(actor=actor, action=AuditAction.REVIEW_DATE_SET,
                     target=f"agent:{agent.name}", agent=agent.name, before=before,
                     after={"review_due_at": _iso(due), "from": level, "proposal": version.pk},
                     reason=f"review date of generation {version.generation}"
                            + (" set by its proposer" if level == "override" else
                               f" from the {level} risk interval"))
    if was_overdue:
        _close_recertification_escalations(agent, actor=actor, version=version, now=now)
        _resume_if_overdue_suspended(agent, actor=actor, version=version, effect=effect)
    _refresh_condition(agent, now)
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


def _refresh_condition(agent: Agent, now: datetime) -> None:
    """The loop writes the Recertified condition on the agent's status, now (the page reads
    it at once)."""
    announce(signals.review_changed, agent=agent, now=now)


def _schedule_review_jobs(agent_id: int, due: datetime) -> None:
    """After commit: the reminder and the overdue check at their exact times, on the default
    queue (the reconcile queue holds passes only, one per agent). The job is named by its
    dotted path: registry/jobs.py imports this module."""

    def schedule() -> None:
        now, queue = timezone.now(), django_rq.get_queue("default", commit_mode="auto")
        for when in (remind_at(due), due):
            if when > now:
                queue.enqueue_at(not_before(when), "registry.jobs.check_review", agent_id)
            else:
                queue.enqueue("registry.jobs.check_review", agent_id)

    transaction.on_commit(schedule, robust=True)


@transaction.atomic
def propose_recertification(agent_name: str, *, actor: Any, comment: str = "",
                            review: ReviewOverride | None = None,
                            source: str = VersionSource.API) -> ProposalOutcome:
    """The owner proposes the active spec again, unchanged, to reset its review date; approved
    like any proposal (four eyes, step-up rules)."""
    agent = Agent.objects.select_related("owner", "active_version").filter(
        name=agent_name).first()
    if agent is None:
        raise NotFound(f"No agent named {agent_name!r}.")
    if isinstance(actor, AgentPrincipal):
        raise NotAllowed("An agent cannot recertify itself; its owner proposes it.")
    check_can_propose(agent, actor)
    if agent.active_version_id is None:
        raise Conflict(f"{agent.name} has no approved desired state to recertify.",
                       code="not_approved")
    pending = agent.versions.filter(state=VersionState.PENDING, recertifies=True).first()
    if pending is not None:
        raise Conflict(f"{agent.name}'s recertification is already proposed (#{pending.pk}).",
                       code="pending")
    active = agent.active_version
    why = comment.strip() or f"recertify generation {agent.generation}"
    outcome = propose(agent, active.spec, active.metadata, actor=actor, source=source,
                      base_generation=agent.generation, comment=why, recertify=True,
                      review=review)
    audit.record(actor=actor, action=AuditAction.RECERTIFICATION_PROPOSED,
                 target=f"proposal:{outcome.version.pk}", agent=agent.name,
                 before={"review_due_at": _iso(agent.review_due_at)},
                 after={"generation": agent.generation, "proposal": outcome.version.pk},
                 reason=why)
    return outcome


def _locked(agent_id: int) -> Agent | None:
    return (Agent.objects.select_for_update().select_related("active_version", "owner")
            .filter(pk=agent_id, active_version__isnull=False)
            .exclude(lifecycle=Lifecycle.RETIRED).first())


@transaction.atomic
def remind_owner(agent_id: int, *, now: datetime | None = None) -> bool:
    """Once per review date, when the reminder time came and the date has not: an alert to the
    owner (their feed) and the audit row; the recertification page and the owner's inbox list
    it as due, and an inbox sweep after commit (the loop's, on the signal) tells the owner's
    notification preferences."""
    now = now or timezone.now()
    agent = _locked(agent_id)
    if (agent is None or agent.review_due_at is None or agent.reminded_at is not None
            or now < remind_at(agent.review_due_at)):
        return False
    agent.reminded_at = now
    agent.save(update_fields=["reminded_at"])
    due = _iso(agent.review_due_at)
    audit.record(actor=SYSTEM, action=AuditAction.RECERTIFICATION_DUE,
                 target=f"agent:{agent.name}", agent=agent.name,
                 after={"review_due_at": due, "owner": agent.owner.username},
                 reason=f"review due by {due}: {agent.owner.username} was reminded")
    announce(signals.alert_raised, event=AlertKind.RECERTIFICATION_DUE, payload={
        "agent": agent.name, "owner_id": agent.owner_id, "link": f"/agents/{agent.name}/",
        "severity": "medium", "review_due_at": due,
        "message": f"review due by {due}: propose a recertification"})
    announce(signals.inbox_item_added, agent_id=agent.pk)
    return True


@transaction.atomic
def mark_overdue(agent_id: int, *, now: datetime | None = None) -> bool:
    """Once per review date, when it passed unrecertified: Recertified=False, an escalation for
    the approvers, and what the guardrails say (warn, restrict to safe tools, suspend)."""
    now = now or timezone.now()
    agent = _locked(agent_id)
    if (agent is None or agent.review_due_at is None or agent.overdue_at is not None
            or now < agent.review_due_at):
        return False
    effect, safe, guardrail = overdue_effect(list(Guardrail.objects.filter(enabled=True)),
                                             agent.labels)
    agent.overdue_at, agent.overdue_effect = now, effect
    agent.restricted_to = safe if effect == OverdueEffect.RESTRICT else None
    agent.save(update_fields=["overdue_at", "overdue_effect", "restricted_to"])
    announce_desired_change(agent.name)
    due = _iso(agent.review_due_at)
    why = (f"review date {due} passed without recertification; "
           f"{effect}" + (f" (guardrail {guardrail})" if guardrail else ""))
    audit.record(actor=SYSTEM, action=AuditAction.RECERTIFICATION_OVERDUE,
                 target=f"agent:{agent.name}", agent=agent.name,
                 after={"review_due_at": due, "effect": effect, "safe_tools": safe,
                        "guardrail": guardrail}, reason=why)
    # the loop escalates to the approvers, alerts, and suspends when the guardrails say so
    announce(signals.review_overdue, agent=agent, why=why, effect=effect, now=now)
    _refresh_condition(agent, now)
    # restrict and suspend are enforced by the loop
    announce(signals.reconcile_requested, agent_id=agent.pk, trigger="manual")
    return True


def due_agent_ids(now: datetime) -> tuple[list[int], list[int]]:
    """(to remind, overdue) among agents not yet told: for the cron backstop."""
    live = Agent.objects.filter(active_version__isnull=False, review_due_at__isnull=False
                                ).exclude(lifecycle=Lifecycle.RETIRED)
    remind = list(live.filter(reminded_at__isnull=True,
                              review_due_at__lte=now + timedelta(
                                  days=settings.RECERT_REMIND_DAYS))
                  .values_list("pk", flat=True))
    overdue = list(live.filter(overdue_at__isnull=True, review_due_at__lte=now)
                   .values_list("pk", flat=True))
    return remind, overdue


@transaction.atomic
def set_review_interval(level: str, *, seconds: int, risk_from: int, actor: Any
                        ) -> ReviewInterval:
    """Compliance sets one risk level's review interval (and, above low, the lowest risk score
    of that level). Dates already set keep; new approvals use it."""
    if isinstance(actor, AgentPrincipal) or not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed("Only compliance staff set review intervals.")
    if level not in RiskLevel.values:
        raise NotFound(f"No risk level {level!r}; one of {', '.join(RiskLevel.values)}.")
    table = intervals()
    before = table[level]
    after = {**table, level: {"seconds": seconds, "risk_from": risk_from}}
    if level != RiskLevel.LOW and (
            after[RiskLevel.HIGH]["risk_from"] <= after[RiskLevel.MEDIUM]["risk_from"]):
        raise Invalid("High risk must start above medium risk.", details=[
            {"pointer": "/risk_from", "message": (
                f"expected high above medium: high from {after[RiskLevel.HIGH]['risk_from']}, "
                f"medium from {after[RiskLevel.MEDIUM]['risk_from']}")}])
    row, _ = ReviewInterval.objects.select_for_update().update_or_create(
        level=level, defaults={"seconds": seconds,
                               "risk_from": 0 if level == RiskLevel.LOW else risk_from,
                               "updated_by": audit_actor(actor), "updated_at": timezone.now()})
    audit.record(actor=actor, action=AuditAction.REVIEW_INTERVAL_CHANGED,
                 target=f"review_interval:{level}",
                 before={"interval": format_seconds(before["seconds"]),
                         "risk_from": before["risk_from"]},
                 after={"interval": format_seconds(row.seconds), "risk_from": row.risk_from},
                 reason=f"{level}-risk agents are reviewed every {format_seconds(row.seconds)}")
    return row


def audit_actor(actor: Any) -> str:
    return actor_label(actor)
