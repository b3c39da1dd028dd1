"""Recertification: every approved desired state is reviewed again by a date. The owner is
reminded before it; at it the agent shows Recertified=False, an escalation opens for its
approvers and the guardrails decide what it gets (warn, restrict, suspend). Recertifying is a
proposal of the active spec that needs the usual approvals and resets the date."""

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import audit
from audit.actions import actor_label
from audit.actors import RECERTIFICATION as SYSTEM
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from registry import signals
from registry.actions.proposals import ProposalOutcome, check_can_propose, propose
from registry.actions.review_clock import iso, refresh_condition, remind_at
from registry.choices import Lifecycle, OverdueEffect, RiskLevel, Role, VersionSource, VersionState
from registry.desired_push import announce_desired_change
from registry.models import Agent, Guardrail, ReviewInterval
from registry.principals import AgentPrincipal
from registry.recertification import (
    ReviewOverride,
    format_seconds,
    intervals,
    overdue_effect,
)
from registry.roles import has_role
from registry.signals import announce


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
                 before={"review_due_at": iso(agent.review_due_at)},
                 after={"generation": agent.generation, "proposal": outcome.version.pk},
                 reason=why)
    return outcome


def _locked(agent_id: int) -> Agent | None:
    return (Agent.objects.select_for_update(no_key=True, of=("self",))
            .select_related("active_version", "owner")
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
    due = iso(agent.review_due_at)
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
    due = iso(agent.review_due_at)
    why = (f"review date {due} passed without recertification; "
           f"{effect}" + (f" (guardrail {guardrail})" if guardrail else ""))
    audit.record(actor=SYSTEM, action=AuditAction.RECERTIFICATION_OVERDUE,
                 target=f"agent:{agent.name}", agent=agent.name,
                 after={"review_due_at": due, "effect": effect, "safe_tools": safe,
                        "guardrail": guardrail}, reason=why)
    # the loop escalates to the approvers, alerts, and suspends when the guardrails say so
    announce(signals.review_overdue, agent=agent, why=why, effect=effect, now=now)
    refresh_condition(agent, now)
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
    row, _ = ReviewInterval.objects.select_for_update(no_key=True).update_or_create(
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
