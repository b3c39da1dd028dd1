"""Waiver requests: an owner never grants a waiver on their own agent (four eyes), but asks
for one, with the pointer, reason, ticket and duration; an approver or compliance grants it
(as a waiver judged like any other: guardrails, second approver, step-up) or declines it,
saying why."""

from collections.abc import MutableMapping
from typing import Any

from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from registry.actions.waivers import _check_body, _grant, check_may_waive, judged_step_up
from registry.choices import Role, VersionState
from registry.models import Agent, Waiver, WaiverRequest
from registry.principals import AgentPrincipal
from registry.roles import has_role
from registry.stepup import StepUp


@transaction.atomic
def request_waiver(agent_name: str, *, pointer: str, reason: str, ticket: str, duration: str,
                   actor: Any) -> WaiverRequest:
    """The agent's owner asks for a waiver at `pointer`; it waits in the approvers' inbox."""
    agent = (Agent.objects.select_for_update(no_key=True, of=("self",))
             .filter(name=agent_name).first())
    if agent is None:
        raise NotFound(f"No agent named {agent_name!r}.")
    if isinstance(actor, AgentPrincipal) or not (
            has_role(actor, Role.OWNER) and agent.owner_id == actor.pk):
        raise NotAllowed("Only the agent's owner asks for a waiver on it.")
    _check_body(agent, pointer, reason, ticket, duration)
    if agent.waiver_requests.filter(state=VersionState.PENDING, pointer=pointer).exists():
        raise Conflict(f"A waiver on {pointer} is already requested for {agent.name}.",
                       code="already_requested")
    request = WaiverRequest.objects.create(
        agent=agent, pointer=pointer, reason=reason.strip(), ticket=ticket.strip(),
        duration=duration.strip(), requested_by=actor)
    audit.record(actor=actor, action=AuditAction.WAIVER_REQUESTED,
                 target=f"waiver_request:{request.pk}", agent=agent.name,
                 after=request.to_dict(), reason=f"{request.ticket}: {request.reason}")
    return request


def _pending(request_id: int, actor: Any, *, lock: bool = False) -> WaiverRequest:
    rows = WaiverRequest.objects.select_related("agent", "requested_by")
    request = (rows.select_for_update(no_key=True, of=("self",)) if lock else rows).filter(
        pk=request_id).first()
    if request is None:
        raise NotFound(f"No waiver request {request_id}.")
    check_may_waive(request.agent, actor)
    if actor.pk == request.requested_by_id:
        raise NotAllowed("Four eyes: you asked for this waiver, so another person grants it.",
                         code="four_eyes")
    if request.state != VersionState.PENDING:
        raise Conflict(f"Waiver request {request.pk} is {request.state}, not pending.",
                       code="not_pending")
    return request


def grant_waiver_request(request_id: int, *, actor: Any, otp: str = "",
                         session: MutableMapping | None = None) -> Waiver:
    """Grant what the owner asked for, as grant_waiver grants any waiver (refused, pending a
    second approver or asking for step-up where the change it stands for would be). The
    second factor is checked in its own transaction first, as grant_waiver checks it, so a
    wrong code stays counted."""
    request = _pending(request_id, actor)
    step_up = judged_step_up(request.agent, request.pointer, actor=actor, otp=otp,
                             session=session)
    return _grant_request(request_id, actor=actor, step_up=step_up)


@transaction.atomic
def _grant_request(request_id: int, *, actor: Any, step_up: StepUp | None) -> Waiver:
    request = _pending(request_id, actor, lock=True)
    waiver = _grant(request.agent_id, pointer=request.pointer, reason=request.reason,
                    ticket=request.ticket, duration=request.duration, actor=actor,
                    step_up=step_up)
    before = request.to_dict()
    request.state, request.decided_by, request.decided_at = (
        VersionState.APPROVED, actor, timezone.now())
    request.waiver = waiver
    request.save(update_fields=["state", "decided_by", "decided_at", "waiver"])
    audit.record(actor=actor, action=AuditAction.WAIVER_GRANTED,
                 target=f"waiver_request:{request.pk}", agent=request.agent.name,
                 before=before, after=request.to_dict(),
                 reason=f"granted as waiver {waiver.pk}, asked by "
                        f"{request.requested_by.username}")
    return waiver


@transaction.atomic
def decline_waiver_request(request_id: int, *, actor: Any, comment: str) -> WaiverRequest:
    """Decline the owner's request, saying why (the owner reads it on the agent's page)."""
    if not comment.strip():
        raise Invalid("Say why the waiver is declined.",
                      details=[{"pointer": "/comment", "message": "required"}])
    request = _pending(request_id, actor, lock=True)
    before = request.to_dict()
    request.state, request.decided_by, request.decided_at = (
        VersionState.REJECTED, actor, timezone.now())
    request.decision_comment = comment.strip()[:2000]
    request.save(update_fields=["state", "decided_by", "decided_at", "decision_comment"])
    audit.record(actor=actor, action=AuditAction.WAIVER_REQUEST_DECLINED,
                 target=f"waiver_request:{request.pk}", agent=request.agent.name,
                 before=before, after=request.to_dict(), reason=comment.strip())
    return request
