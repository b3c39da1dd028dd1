"""Shadow mode and the blast-radius breaker."""

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.choices import AuditAction
from config.errors import Conflict, DomainError, NotAllowed
from reconciliation.choices import BreakerScope, Trigger
from reconciliation.controller import work_queue
from reconciliation.controller.triggers import request_reconcile
from reconciliation.models import AgentStatus, BreakerTrip, ControlState
from registry.choices import Role
from registry.manifest import duration_seconds
from registry.models import Agent
from registry.roles import has_role


@transaction.atomic
def set_shadow(*, actor: Any, enabled: bool, agent: Agent | None = None, duration: str = "",
               reason: str = "") -> dict[str, Any]:
    """Shadow mode for one agent or (agent=None) for the whole cluster: record, apply nothing.

    One agent's shadow is a lighter path to the outcome of a waiver on everything, so it is
    judged like one: it lasts `duration` (at most 30d) and then ends by itself; switched on
    by the agent's owner it is only a request until a second person (an approver or compliance
    staff, not the owner) approves it. Switching it off is never held: that is enforcement,
    and it starts at once (a pass for the agent, or the resync for the cluster)."""
    if agent is None:
        if not has_role(actor, Role.COMPLIANCE):
            raise NotAllowed("Only compliance staff switch global shadow mode.")
        control = ControlState.objects.select_for_update(no_key=True).get_or_create(pk=1)[0]
        before, control.shadow = control.shadow, enabled
        control.save(update_fields=["shadow"])
        audit.record(actor=actor, action=AuditAction.SHADOW_CHANGED, target="control:shadow",
                     agent="", before={"shadow": before}, after={"shadow": enabled})
        if before and not enabled:  # enforcement resumes now, not at the next periodic resync
            transaction.on_commit(_resync_now, robust=True)
        return {"shadow": enabled}
    owner = has_role(actor, Role.OWNER) and agent.owner_id == getattr(actor, "pk", None)
    if not (owner or has_role(actor, Role.COMPLIANCE)):
        raise NotAllowed("Only the agent's owner or compliance staff switch its shadow mode.")
    status = AgentStatus.objects.select_for_update(no_key=True).get_or_create(agent=agent)[0]
    before = shadow_state(status)
    if not enabled:
        was_on = status.shadow
        status.shadow, status.shadow_until, status.shadow_request = False, None, {}
        status.save(update_fields=["shadow", "shadow_until", "shadow_request"])
        audit.record(actor=actor, action=AuditAction.SHADOW_CHANGED,
                     target=f"agent:{agent.name}", agent=agent.name, before=before,
                     after=shadow_state(status), reason=reason.strip())
        if was_on:  # a pass now applies what the shadow only recorded
            request_reconcile(agent.pk, Trigger.MANUAL)
        return shadow_state(status)
    seconds = _shadow_body(duration, reason)
    now = timezone.now()
    if owner or agent.owner_id == getattr(actor, "pk", None):
        # the owner asks; a second person decides (the owner may also hold compliance)
        status.shadow_request = {"by": actor.username, "by_id": actor.pk, "seconds": seconds,
                                 "duration": duration, "reason": reason.strip(),
                                 "at": now.isoformat()}
        status.save(update_fields=["shadow_request"])
        audit.record(actor=actor, action=AuditAction.SHADOW_REQUESTED,
                     target=f"agent:{agent.name}", agent=agent.name, before=before,
                     after=shadow_state(status), reason=reason.strip())
        return shadow_state(status)
    _shadow_on(status, agent, seconds=seconds, actor=actor, before=before, now=now,
               reason=reason.strip())
    return shadow_state(status)


def _resync_now() -> None:
    """The periodic resync, run once now: every agent with drift shadow mode only recorded."""
    work_queue.queue().enqueue("reconciliation.jobs.resync")


def _shadow_body(duration: str, reason: str) -> int:
    """The shadow's seconds, or 400 naming what is missing: how long, and why."""
    problems = []
    seconds = 0
    try:
        seconds = duration_seconds(duration)
    except ValueError as error:
        problems.append({"pointer": "/duration", "message": str(error)})
    if not reason.strip():
        problems.append({"pointer": "/reason", "message": "required: why corrections stop"})
    if problems:
        raise DomainError(problems[0]["message"], details=problems)
    return seconds


def _shadow_on(status: AgentStatus, agent: Agent, *, seconds: int, actor: Any,
               before: dict[str, Any], now: datetime, reason: str,
               requested_by: str = "") -> None:
    status.shadow, status.shadow_until = True, now + timedelta(seconds=seconds)
    status.shadow_request = {}
    status.save(update_fields=["shadow", "shadow_until", "shadow_request"])
    after = {**shadow_state(status), "approved_by": actor.username}
    if requested_by:
        after["requested_by"] = requested_by
    audit.record(actor=actor, action=AuditAction.SHADOW_CHANGED, target=f"agent:{agent.name}",
                 agent=agent.name, before=before, after=after, reason=reason)
    # a pass now, in shadow; it asks its controller for the pass at the shadow's end
    request_reconcile(agent.pk, Trigger.SHADOW_STARTED)


@transaction.atomic
def approve_shadow(agent: Agent, *, actor: Any) -> dict[str, Any]:
    """A second person (an approver or compliance staff; never the owner or the one who asked)
    puts the owner's requested shadow in force, for the duration asked, from now."""
    if not (has_role(actor, Role.APPROVER) or has_role(actor, Role.COMPLIANCE)):
        raise NotAllowed("Only approvers and compliance staff approve a shadow switch.")
    status = AgentStatus.objects.select_for_update(no_key=True).get_or_create(agent=agent)[0]
    request = status.shadow_request or {}
    if actor.pk in (agent.owner_id, request.get("by_id")):
        raise NotAllowed("Four eyes: you cannot approve shadow mode for an agent you own or "
                         "whose shadow you asked for.", code="four_eyes")
    if not request:
        raise Conflict(f"{agent.name} has no shadow switch waiting for approval.",
                       code="not_pending")
    before = shadow_state(status)
    _shadow_on(status, agent, seconds=int(request["seconds"]), actor=actor, before=before,
               now=timezone.now(), reason=request.get("reason", ""),
               requested_by=request.get("by", ""))
    return shadow_state(status)


def shadow_state(status: AgentStatus) -> dict[str, Any]:
    """One agent's shadow as the API and the audit show it."""
    request = status.shadow_request or {}
    return {"shadow": status.shadow,
            "shadow_until": status.shadow_until.isoformat().replace("+00:00", "Z")
            if status.shadow_until else None,
            "pending": bool(request),
            "requested_by": request.get("by"), "requested_duration": request.get("duration")}


def end_expired_shadow(status: AgentStatus, now: datetime) -> bool:
    """In a pass's transaction, with the status row locked: a shadow whose time is up ends
    (audited) and the pass enforces. True when it ended one."""
    if not status.shadow or status.shadow_until is None or status.shadow_until > now:
        return False
    before = shadow_state(status)
    status.shadow, status.shadow_until = False, None
    status.save(update_fields=["shadow", "shadow_until"])
    audit.record(actor=SYSTEM, action=AuditAction.SHADOW_EXPIRED,
                 target=f"agent:{status.agent.name}", agent=status.agent.name, before=before,
                 after=shadow_state(status), reason="shadow mode ended at its expiry; "
                                                    "corrections are applied again")
    return True


@transaction.atomic
def reset_breaker(*, actor: Any, reason: str, scope: str = "global") -> None:
    """Compliance resumes automatic correction after a tripped breaker: the cluster's
    (`global`) or one owner's or team's (`owner:alice`, `team:payments`)."""
    if not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed("Only compliance staff reset the breaker.")
    control = ControlState.objects.select_for_update(no_key=True).get_or_create(pk=1)[0]
    now = timezone.now()
    if scope != BreakerScope.GLOBAL:
        trip = BreakerTrip.objects.select_for_update(no_key=True).filter(scope=scope).first()
        if trip is None:
            raise Conflict(f"The breaker for {scope} is not tripped.", code="not_tripped")
        before = trip.to_dict()
        trip.delete()
        target = f"control:breaker:{scope}"
    else:
        if control.breaker_tripped_at is None:
            raise Conflict("The breaker is not tripped.", code="not_tripped")
        before = {"tripped_at": control.breaker_tripped_at.isoformat(),
                  "reason": control.breaker_reason}
        control.breaker_tripped_at = None
        control.breaker_reason = ""
        target = "control:breaker"
    # the reset holds: from now the breaker counts only findings detected after it
    control.breaker_resets = {**control.breaker_resets, str(scope): now.isoformat()}
    control.save(update_fields=["breaker_tripped_at", "breaker_reason", "breaker_resets"])
    audit.record(actor=actor, action=AuditAction.BREAKER_RESET, target=target,
                 before=before, after={"tripped_at": None, "counts_findings_after":
                                       now.isoformat()}, reason=reason)
