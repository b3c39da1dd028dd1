"""Waivers: an approver or compliance time-boxes an exception for one agent (a drift accepted,
a rule allowed) with a reason and a ticket; at its end the agent is enforced again by itself."""

from collections.abc import MutableMapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.choices import AuditAction
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from registry import signals
from registry.actions.proposals import assess, current_metadata
from registry.actions.stepup import verify_step_up
from registry.choices import Lifecycle, Role, WaiverState
from registry.manifest import duration_seconds
from registry.models import Agent, Waiver
from registry.principals import AgentPrincipal
from registry.roles import has_role
from registry.signals import announce
from registry.stepup import StepUp, proposal_reasons, required_error
from registry.waivers import POINTER_EXPECTED, specific_problem, waived_spec


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


@dataclass(frozen=True)
class WaiverJudgement:
    """A waiver judged as the spec change it stands for: its risk, the guardrail (and group
    rule) verdicts, how many distinct approvers, and why a fresh second factor is needed."""

    risk: int
    guardrails: list[dict[str, Any]]
    required_approvals: int
    step_up_reasons: list[str]
    denials: list[dict[str, Any]]
    held: bool

    def to_dict(self) -> dict[str, Any]:
        return {"risk": self.risk, "guardrails": self.guardrails,
                "required_approvals": self.required_approvals,
                "step_up_reasons": self.step_up_reasons}


def judge_waiver(agent: Agent, pointer: str, now: datetime) -> WaiverJudgement:
    """Judge a waiver on `pointer` as the proposal of the spec it lets the agent run with
    (registry.waivers.waived_spec): the same guardrails, group rules, step-up and N-of-M. A
    waiver whose area cannot be put as a spec is judged by the strictest bar: two approvers,
    and step-up wherever step-up is configured."""
    active = agent.active_version.spec if agent.active_version_id else None
    spec = waived_spec(active, pointer) if active is not None else None
    if spec is None:
        reasons = ([f"a waiver on {pointer} cannot be judged as a spec change: it asks for "
                    "the strictest sign-off"] if settings.STEPUP_RISK_THRESHOLD is not None
                   else [])
        return WaiverJudgement(0, [], 2, reasons, [], False)
    metadata = current_metadata(agent) or {}
    assessment = assess(agent.name, active, spec, metadata, now, current_metadata(agent))
    results = [r.to_dict() for r in assessment.guardrails]
    return WaiverJudgement(
        risk=assessment.risk, guardrails=results,
        required_approvals=assessment.required_approvals,
        step_up_reasons=proposal_reasons(assessment.risk, results),
        denials=[r.to_dict() for r in assessment.denials], held=assessment.held)


def _refuse(agent: Agent, judgement: WaiverJudgement) -> None:
    """A waiver the equivalent change could never get is refused, as that change would be."""
    if judgement.denials:
        first = judgement.denials[0]
        raise Invalid(f"{agent.name}: refused by guardrail {first['guardrail']}: "
                      f"{first['message']}", code="guardrail_denied", details=[
                          {"pointer": "/pointer", "message": f"{d['guardrail']}: {d['message']}",
                           "guardrail": d["guardrail"]} for d in judgement.denials])
    if judgement.held:
        raise Conflict("A guardrail could not be evaluated for the change this waiver stands "
                       "for; it cannot be granted until the guardrail is fixed.", code="held")


def _check_body(agent: Agent, pointer: Any, reason: str, ticket: str,
                duration: str) -> int:
    """The waiver's seconds, or 422 naming every problem with the body."""
    problems = []
    problem = (specific_problem(pointer) if isinstance(pointer, str)
               else f"expected {POINTER_EXPECTED}")
    if problem:
        problems.append({"pointer": "/pointer", "message": problem})
    if not reason.strip():
        problems.append({"pointer": "/reason", "message": "required: why the exception"})
    if not ticket.strip():
        problems.append({"pointer": "/ticket", "message": "required: the ticket reference"})
    seconds = 0
    try:
        seconds = duration_seconds(duration)
    except ValueError as error:
        problems.append({"pointer": "/duration", "message": str(error)})
    if agent.lifecycle == Lifecycle.RETIRED:
        problems.append({"pointer": "", "message": f"{agent.name} is retired"})
    if problems:
        raise Invalid(problems[0]["message"], details=problems)
    return seconds


def grant_waiver(agent_name: str, *, pointer: str, reason: str, ticket: str, duration: str,
                 actor: Any, otp: str = "", session: MutableMapping | None = None) -> Waiver:
    """Allow drift and broken rules at `pointer` (and under it) for `duration` from now,
    judged as the spec change it stands for: refused where that change would be refused,
    after a fresh second factor where it would need one, and pending a second approver
    where it would need two."""
    agent = Agent.objects.select_related("owner", "active_version").filter(
        name=agent_name).first()
    if agent is None:
        raise NotFound(f"No agent named {agent_name!r}.")
    check_may_waive(agent, actor)
    _check_body(agent, pointer, reason, ticket, duration)
    step_up = judged_step_up(agent, pointer, actor=actor, otp=otp, session=session)
    return _grant(agent.pk, pointer=pointer, reason=reason, ticket=ticket, duration=duration,
                  actor=actor, step_up=step_up)


def judged_step_up(agent: Agent, pointer: str, *, actor: Any, otp: str,
                   session: MutableMapping | None) -> StepUp | None:
    """A waiver at `pointer` judged as the change it stands for: refused where that change
    would be; else the second factor it needs, checked in its own transaction (a wrong code
    stays counted), or None when it needs none."""
    judgement = judge_waiver(agent, pointer, timezone.now())
    _refuse(agent, judgement)
    return (verify_step_up(actor=actor, code=otp, reasons=judgement.step_up_reasons,
                           session=session) if judgement.step_up_reasons else None)


@transaction.atomic
def _grant(agent_id: int, *, pointer: str, reason: str, ticket: str, duration: str,
           actor: Any, step_up: StepUp | None) -> Waiver:
    agent = (Agent.objects.select_for_update(no_key=True, of=("self",))
             .select_related("owner", "active_version").get(pk=agent_id))
    check_may_waive(agent, actor)
    seconds = _check_body(agent, pointer, reason, ticket, duration)
    now = timezone.now()
    judgement = judge_waiver(agent, pointer, now)  # again, under the lock
    _refuse(agent, judgement)
    if judgement.step_up_reasons and step_up is None:  # marked for step-up since first read
        raise required_error(judgement.step_up_reasons, actor,
                             problem="grant it again with a current code as `otp`.")
    pending = judgement.required_approvals > 1
    waiver = Waiver.objects.create(
        agent=agent, pointer=pointer, reason=reason.strip(), ticket=ticket.strip(),
        granted_by=actor, created_at=now, expires_at=now + timedelta(seconds=seconds),
        state=WaiverState.PENDING if pending else WaiverState.ACTIVE,
        required_approvals=judgement.required_approvals, judgement=judgement.to_dict())
    after = waiver.to_dict()
    if step_up is not None:
        after["step_up_given"] = {**step_up.to_dict(), "reasons": judgement.step_up_reasons}
    audit.record(actor=actor, action=AuditAction.WAIVER_GRANTED, target=f"waiver:{waiver.pk}",
                 agent=agent.name, after=after,
                 reason=f"{waiver.ticket}: {waiver.reason}" + (
                     f" (pending: needs {waiver.required_approvals} approvers)" if pending
                     else ""))
    if not pending:
        _put_in_force(waiver)
    return waiver


def _put_in_force(waiver: Waiver) -> None:
    # the waived drift stops being enforced now; that pass asks for the one at its end
    announce(signals.reconcile_requested, agent_id=waiver.agent_id, trigger="waiver_granted")


def confirm_waiver(waiver_id: int, *, actor: Any, otp: str = "",
                   session: MutableMapping | None = None) -> Waiver:
    """A second approver (not the grantor, not the owner) signs a waiver that needs two; after
    a fresh second factor where its equivalent change would need one. Then it is in force."""
    waiver = Waiver.objects.select_related("agent").filter(pk=waiver_id).first()
    _check_confirm(waiver, waiver_id, actor)
    reasons = waiver.judgement.get("step_up_reasons") or []
    step_up = (verify_step_up(actor=actor, code=otp, reasons=reasons, session=session)
               if reasons else None)
    return _confirm(waiver_id, actor=actor, step_up=step_up)


def _check_confirm(waiver: Waiver | None, waiver_id: int, actor: Any) -> None:
    if isinstance(actor, AgentPrincipal) or not (
            has_role(actor, Role.APPROVER) or has_role(actor, Role.COMPLIANCE)):
        raise NotAllowed("Only approvers and compliance staff sign waivers.")
    if waiver is None:
        raise NotFound(f"No waiver {waiver_id}.")
    check_may_waive(waiver.agent, actor)
    if actor.pk == waiver.granted_by_id:
        raise NotAllowed("Four eyes: the waiver's grantor cannot be its second approver.",
                         code="four_eyes")
    if waiver.state != WaiverState.PENDING:
        raise Conflict(f"Waiver {waiver.pk} is {waiver.state}, not pending.", code="not_pending")
    if waiver.withdrawn_at is not None or waiver.expires_at <= timezone.now():
        raise Conflict(f"Waiver {waiver.pk} has already ended.", code="ended")


def check_can_confirm(waiver_id: int, *, actor: Any) -> None:
    """403/404/409 before a confirmation's body is read."""
    _check_confirm(Waiver.objects.select_related("agent").filter(pk=waiver_id).first(),
                   waiver_id, actor)


@transaction.atomic
def _confirm(waiver_id: int, *, actor: Any, step_up: StepUp | None) -> Waiver:
    waiver = (Waiver.objects.select_for_update(no_key=True, of=("self",))
              .select_related("agent", "granted_by").filter(pk=waiver_id).first())
    _check_confirm(waiver, waiver_id, actor)
    reasons = waiver.judgement.get("step_up_reasons") or []
    if reasons and step_up is None:
        raise required_error(reasons, actor, problem="sign again with a current code.")
    before = waiver.to_dict()
    waiver.state, waiver.confirmed_by, waiver.confirmed_at = (
        WaiverState.ACTIVE, actor, timezone.now())
    waiver.save(update_fields=["state", "confirmed_by", "confirmed_at"])
    after = waiver.to_dict()
    if step_up is not None:
        after["step_up_given"] = {**step_up.to_dict(), "reasons": reasons}
    audit.record(actor=actor, action=AuditAction.WAIVER_CONFIRMED,
                 target=f"waiver:{waiver.pk}", agent=waiver.agent.name, before=before,
                 after=after, reason=f"second approver of {waiver.ticket}: {waiver.reason}")
    _put_in_force(waiver)
    return waiver


def in_force(now: datetime) -> Q:
    """The one rule for a waiver in force at `now`: every sign-off given (active) and not yet
    ended (whether or not its lapse was recorded yet); one still waiting for its second
    approver is not."""
    return Q(state=WaiverState.ACTIVE, expires_at__gt=now)


def active_waivers(agent: Agent, now: datetime) -> list[Waiver]:
    """The agent's waivers in force at `now` (read only: behaviour rules, the backtest)."""
    return list(agent.waivers.filter(in_force(now)).select_related("granted_by"))


def waivers_in_force(agent: Agent, now: datetime) -> list[Waiver]:
    """For a pass: the agent's waivers in force at `now`, read together with those that ended
    without their lapse recorded, which are recorded here first (in a transaction of their
    own; none in the usual case, so one read)."""
    ended = Q(state=WaiverState.ACTIVE, expires_at__lte=now, lapsed_at__isnull=True)
    read = list(agent.waivers.filter(in_force(now) | ended).select_related("granted_by"))
    if any(w.expires_at <= now for w in read):
        with transaction.atomic():
            record_lapses(agent, now)
    return [w for w in read if w.expires_at > now]


def record_lapses(agent: Agent, now: datetime) -> list[Waiver]:
    """Record every waiver of the agent that has ended: the audit says it lapsed. Call in the
    pass's transaction; enforcement itself only compares expires_at with now."""
    ended = list(agent.waivers.select_for_update(no_key=True).filter(
        expires_at__lte=now, lapsed_at__isnull=True, state=WaiverState.ACTIVE))
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
    waiver = (Waiver.objects.select_for_update(no_key=True, of=("self",))
              .select_related("agent", "granted_by").filter(pk=waiver_id).first())
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
    # enforced again now
    announce(signals.reconcile_requested, agent_id=waiver.agent_id, trigger="manual")
    return waiver


def may_withdraw(agent: Agent, actor: Any) -> bool:
    """The agent's owner (who lives with the exception) or compliance staff."""
    if isinstance(actor, AgentPrincipal) or not getattr(actor, "pk", None):
        return False
    return agent.owner_id == actor.pk or has_role(actor, Role.COMPLIANCE)
