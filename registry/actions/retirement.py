"""Retiring an agent: the owner proposes, an approver (four eyes) approves; its tokens are
revoked, its pending proposals withdrawn, it leaves the resync and the rule windows, and its
platform is asked to stop it. Its history stays readable."""

from collections.abc import MutableMapping
from typing import Any

from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from registry import signals
from registry.actions.proposals import check_can_propose
from registry.actions.stepup import verify_step_up
from registry.choices import Lifecycle, Role, VersionState
from registry.desired_push import announce_desired_change
from registry.models import Agent, ApiToken, Retirement
from registry.principals import AgentPrincipal
from registry.roles import has_role
from registry.signals import announce
from registry.stepup import StepUp, required_error, retirement_reasons


@transaction.atomic
def propose_retirement(agent_name: str, *, actor: Any, reason: str) -> Retirement:
    """The owner asks for the agent to be retired; nothing changes until it is approved."""
    agent = (Agent.objects.select_for_update(no_key=True, of=("self",)).select_related("owner")
             .filter(name=agent_name).first())
    if agent is None:
        raise NotFound(f"No agent named {agent_name!r}.")
    if isinstance(actor, AgentPrincipal):
        raise NotAllowed("An agent cannot retire itself; its owner proposes it.")
    check_can_propose(agent, actor)
    if not reason.strip():
        raise Invalid("A retirement needs a reason.", details=[
            {"pointer": "/reason", "message": "required"}])
    if agent.lifecycle == Lifecycle.RETIRED:
        raise Conflict(f"{agent.name} is already retired.", code="retired")
    if agent.retirements.filter(state=VersionState.PENDING).exists():
        raise Conflict(f"{agent.name}'s retirement is already proposed.", code="pending")
    retirement = Retirement.objects.create(agent=agent, reason=reason.strip(),
                                           proposed_by=actor)
    audit.record(actor=actor, action=AuditAction.RETIREMENT_PROPOSED,
                 target=f"retirement:{retirement.pk}", agent=agent.name,
                 after=retirement.to_dict(), reason=retirement.reason)
    return retirement


def _check_retirement(retirement: Retirement | None, retirement_id: int, actor: Any) -> None:
    if isinstance(actor, AgentPrincipal) or not has_role(actor, Role.APPROVER):
        raise NotAllowed("Only approvers decide on a retirement.")
    if retirement is None:
        raise NotFound(f"No retirement {retirement_id}.")
    if actor.pk in (retirement.proposed_by_id, retirement.agent.owner_id):
        raise NotAllowed("Four eyes: you cannot approve retiring an agent you own or whose "
                         "retirement you proposed.", code="four_eyes")
    if retirement.state != VersionState.PENDING:
        raise Conflict(f"Retirement {retirement.pk} is {retirement.state}, not pending.",
                       code="not_pending")


def check_can_decide_retirement(retirement_id: int, *, actor: Any) -> None:
    """403 for someone who may not decide it (wrong role, four eyes), 404 when missing, 409
    when it was decided already; before a decision's body is read."""
    _check_retirement(Retirement.objects.select_related("agent").filter(
        pk=retirement_id).first(), retirement_id, actor)


def approve_retirement(retirement_id: int, *, actor: Any, comment: str = "", otp: str = "",
                       session: MutableMapping | None = None) -> Retirement:
    """Carry out a proposed retirement (an approver who neither proposed it nor owns it), after
    a fresh second factor when step-up is configured."""
    step_up = None
    reasons = retirement_reasons()
    if reasons:
        _check_retirement(Retirement.objects.select_related("agent").filter(
            pk=retirement_id).first(), retirement_id, actor)  # refusals before any code
        step_up = verify_step_up(actor=actor, code=otp, reasons=reasons, session=session)
    return _retire(retirement_id, actor=actor, comment=comment, step_up=step_up,
                   reasons=reasons)


@transaction.atomic
def _retire(retirement_id: int, *, actor: Any, comment: str, step_up: StepUp | None,
            reasons: list[str]) -> Retirement:
    retirement = (Retirement.objects.select_for_update(no_key=True, of=("self",))
                  .select_related("agent", "proposed_by").filter(pk=retirement_id).first())
    agent = (Agent.objects.select_for_update(no_key=True).get(pk=retirement.agent_id)
             if retirement is not None else None)
    _check_retirement(retirement, retirement_id, actor)
    if reasons and step_up is None:
        raise required_error(reasons, actor, problem="approve again with a current code.")
    now = timezone.now()
    retirement.state, retirement.decided_by, retirement.decided_at = (
        VersionState.APPROVED, actor, now)
    retirement.save(update_fields=["state", "decided_by", "decided_at"])
    before = agent.lifecycle
    agent.lifecycle, agent.updated_at = Lifecycle.RETIRED, now
    announce(signals.fleet_changed)  # a retired agent leaves the fleet view
    agent.save(update_fields=["lifecycle", "updated_at"])
    # the loop marks it retired (never "in policy" again) and stops it on its platform
    announce(signals.agent_retired, agent_id=agent.pk)
    announce_desired_change(agent.name)  # its held long-poll answers 401 at once
    tokens = list(ApiToken.objects.filter(agent=agent, revoked_at__isnull=True)
                  .values_list("key_prefix", flat=True))
    ApiToken.objects.filter(agent=agent, revoked_at__isnull=True).update(revoked_at=now)
    withdrawn = list(agent.versions.filter(state=VersionState.PENDING)
                     .values_list("pk", flat=True))
    agent.versions.filter(pk__in=withdrawn).update(state=VersionState.WITHDRAWN, decided_at=now)
    audit.record(actor=actor, action=AuditAction.AGENT_RETIRED, target=f"agent:{agent.name}",
                 agent=agent.name, before={"lifecycle": before},
                 after={"lifecycle": Lifecycle.RETIRED, "retirement": retirement.pk,
                        "tokens_revoked": tokens, "proposals_withdrawn": withdrawn,
                        **({"step_up": {**step_up.to_dict(), "reasons": reasons}}
                           if step_up is not None else {})},
                 reason=comment or retirement.reason)
    return retirement


@transaction.atomic
def reject_retirement(retirement_id: int, *, actor: Any, comment: str) -> Retirement:
    """An approver (four eyes, as for approving) refuses a proposed retirement, saying why;
    the agent stays as it is."""
    retirement = (Retirement.objects.select_for_update(no_key=True, of=("self",))
                  .select_related("agent", "proposed_by").filter(pk=retirement_id).first())
    _check_retirement(retirement, retirement_id, actor)
    if not comment.strip():
        raise Invalid("A rejection needs a comment.", details=[
            {"pointer": "/comment", "message": "required"}])
    retirement.state, retirement.decided_by, retirement.decided_at = (
        VersionState.REJECTED, actor, timezone.now())
    retirement.decision_comment = comment.strip()
    retirement.save(update_fields=["state", "decided_by", "decided_at", "decision_comment"])
    audit.record(actor=actor, action=AuditAction.RETIREMENT_REJECTED,
                 target=f"retirement:{retirement.pk}", agent=retirement.agent.name,
                 after=retirement.to_dict(), reason=retirement.decision_comment)
    return retirement
