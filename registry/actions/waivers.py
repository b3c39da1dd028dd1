"""Waivers: an approver or compliance time-boxes an exception for one agent (a drift accepted,
a rule allowed) with a reason and a ticket; at its end the agent is enforced again by itself."""

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from reconciliation.triggers import request_reconcile, schedule_waiver_lapse
from registry.choices import Lifecycle, Role
from registry.manifest import duration_seconds
from registry.models import Agent, Waiver
from registry.principals import AgentPrincipal
from registry.roles import has_role
from registry.waivers import POINTER, POINTER_EXPECTED

SYSTEM = "system:reconciler"


def may_waive(agent: Agent, actor: Any) -> bool:
    """Approvers and compliance staff, never the agent's owner (four eyes)."""
    try:
        check_may_waive(agent, actor)
    except NotAllowed:
        return False
    return True


def check_may_waive(agent: Agent, actor: Any) -> None:
    """Refuse (403) anyone but an approver or compliance who does not own the agent."""
    if isinstance(actor, AgentPrincipal) or not (
            has_role(actor, Role.APPROVER) or has_role(actor, Role.COMPLIANCE)):
        raise NotAllowed("Only approvers and compliance staff grant waivers.")
    if agent.owner_id == actor.pk:
        raise NotAllowed("Four eyes: you cannot waive enforcement on an agent you own.",
                         code="four_eyes")


@transaction.atomic
def grant_waiver(agent_name: str, *, pointer: str, reason: str, ticket: str, duration: str,
                 actor: Any) -> Waiver:
    """Allow drift and broken rules at `pointer` (and under it) for `duration` from now."""
    agent = Agent.objects.select_for_update().select_related("owner").filter(
        name=agent_name).first()
    if agent is None:
        raise NotFound(f"No agent named {agent_name!r}.")
    check_may_waive(agent, actor)
    problems = []
    if not isinstance(pointer, str) or not POINTER.match(pointer):
        problems.append({"pointer": "/pointer", "message": f"expected {POINTER_EXPECTED}"})
    if not reason.strip():
        problems.append({"pointer": "/reason", "message": "required: why the exception"})
    if not ticket.strip():
        problems.append({"pointer": "/ticket", "message": "required: the ticket reference"})
    try:
        seconds = duration_seconds(duration)
    except ValueError as error:
        problems.append({"pointer": "/duration", "message": str(error)})
    if agent.lifecycle == Lifecycle.RETIRED:
        problems.append({"pointer": "", "message": f"{agent.name} is retired"})
    if problems:
        raise Invalid(problems[0]["message"], details=problems)
    now = timezone.now()
    waiver = Waiver.objects.create(agent=agent, pointer=pointer, reason=reason.strip(),
                                   ticket=ticket.strip(), granted_by=actor, created_at=now,
                                   expires_at=now + timedelta(seconds=seconds))
    audit.record(actor=actor, action=AuditAction.WAIVER_GRANTED, target=f"waiver:{waiver.pk}",
                 agent=agent.name, after=waiver.to_dict(),
                 reason=f"{waiver.ticket}: {waiver.reason}")
    request_reconcile(agent.pk, "manual")  # the waived drift stops being enforced now
    schedule_waiver_lapse(agent.pk, waiver.expires_at)
    return waiver


def active_waivers(agent: Agent, now: datetime) -> list[Waiver]:
    """The agent's waivers in force at `now` (whether or not a lapse was recorded yet)."""
    return list(agent.waivers.filter(expires_at__gt=now).select_related("granted_by"))


def record_lapses(agent: Agent, now: datetime) -> list[Waiver]:
    """Record every waiver of the agent that has ended: the audit says it lapsed. Call in the
    pass's transaction; enforcement itself only compares expires_at with now."""
    ended = list(agent.waivers.select_for_update().filter(expires_at__lte=now,
                                                          lapsed_at__isnull=True))
    for waiver in ended:
        waiver.lapsed_at = now
        waiver.save(update_fields=["lapsed_at"])
        audit.record(actor=SYSTEM, action=AuditAction.WAIVER_LAPSED,
                     target=f"waiver:{waiver.pk}", agent=agent.name, after=waiver.to_dict(),
                     reason=f"waiver on {waiver.pointer} ({waiver.ticket}) ended; enforced "
                            "again")
    return ended


@transaction.atomic
def withdraw_waiver(waiver_id: int, *, actor: Any, reason: str) -> Waiver:
    """End a waiver before its expiry (the agent's owner, or compliance staff), saying why:
    the waived drift is enforced again at once and the audit says who ended it."""
    waiver = (Waiver.objects.select_for_update().select_related("agent", "granted_by")
              .filter(pk=waiver_id).first())
    if waiver is None:
        raise NotFound(f"No waiver {waiver_id}.")
    if not may_withdraw(waiver.agent, actor):
        raise NotAllowed("Only the agent's owner or compliance staff withdraw a waiver.")
    if not reason.strip():
        raise Invalid("Withdrawing a waiver needs a reason.", details=[
            {"pointer": "/reason", "message": "required"}])
    now = timezone.now()
    if waiver.withdrawn_at is not None or waiver.expires_at <= now:
        raise Conflict(f"Waiver {waiver.pk} has already ended.", code="ended")
    before = waiver.to_dict()
    waiver.withdrawn_at, waiver.withdrawn_by, waiver.expires_at = now, actor, now
    waiver.lapsed_at = now  # its end is recorded here, not as a lapse
    waiver.save(update_fields=["withdrawn_at", "withdrawn_by", "expires_at", "lapsed_at"])
    audit.record(actor=actor, action=AuditAction.WAIVER_WITHDRAWN,
                 target=f"waiver:{waiver.pk}", agent=waiver.agent.name, before=before,
                 after=waiver.to_dict(), reason=reason.strip())
    request_reconcile(waiver.agent_id, "manual")  # enforced again now
    return waiver


def may_withdraw(agent: Agent, actor: Any) -> bool:
    """The agent's owner (who lives with the exception) or compliance staff."""
    if isinstance(actor, AgentPrincipal) or not getattr(actor, "pk", None):
        return False
    return agent.owner_id == actor.pk or has_role(actor, Role.COMPLIANCE)
