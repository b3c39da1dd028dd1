"""Runtime decisions: an agent asks before a sensitive action and gets allow, deny, or pending
a human. A human's allow is single-use and bound to the request's parameters; a pending request
nobody answers expires to deny."""

from datetime import datetime, timedelta
from typing import Any

import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from config import queues
from config.errors import Conflict, Invalid, Malformed, NotAllowed, NotFound
from config.scheduled_time import not_before
from reconciliation.actions.common import alert, desired_now, state_hash
from reconciliation.agent_status import refresh_status
from reconciliation.choices import DecisionOutcome, DecisionStatus, EscalationStatus, Trigger
from reconciliation.controller.triggers import request_reconcile
from reconciliation.models import Escalation
from registry import holds
from registry.choices import Lifecycle, Role
from registry.manifest import duration_seconds
from registry.models import Agent
from registry.principals import acting_agent
from registry.roles import has_role
from runtime import windows
from runtime.actions import webhooks
from runtime.actions.behaviour import ensure_windows
from runtime.actions.group_rules import decision_block, decision_hold
from runtime.behaviour import callable_tools, window_checks
from runtime.decision_request import DecisionRequest, RequestError, parse_request
from runtime.events import Event
from runtime.models import Decision

# What the spec does with an action it names nowhere, unless it says (spec.unlisted_actions).
UNLISTED_DEFAULT = "deny"


def _amount(value: float) -> str:
    return f"${value:,.0f}" if float(value).is_integer() else f"${value:,.2f}"


def _action_rule(spec: dict[str, Any], request: DecisionRequest,
                 tools: set[str]) -> tuple[str, str]:
    """(outcome, rule) for the governed action: its rule in spec.actions (which reads the
    amount), an approved tool with no rule, or the spec's default for anything it does not
    name."""
    action, amount = request.action, request.amount
    limits = spec["actions"].get(action)
    if limits is None:
        if action in tools:
            return DecisionOutcome.ALLOW, f"tools/{action}: an approved tool with no action rule"
        default = spec.get("unlisted_actions", UNLISTED_DEFAULT)
        return (DecisionOutcome.ALLOW if default == "allow" else DecisionOutcome.DENY,
                f"unlisted_actions: {action} is neither in the spec's actions nor an approved "
                f"tool, and the spec's default for such actions is {default}")
    reads = [name for name in ("max", "approval_above") if limits[name] is not None]
    if amount is None:
        return DecisionOutcome.DENY, (
            f"actions/{action}/{reads[0]}: the rule reads the amount and {request.amount_problem}"
            "; without it the answer is no")
    if limits["max"] is not None and amount > limits["max"]:
        return DecisionOutcome.DENY, (f"actions/{action}/max: {action} of {_amount(amount)} is "
                                      f"above the maximum {_amount(limits['max'])}")
    if limits["approval_above"] is not None and amount > limits["approval_above"]:
        return DecisionOutcome.PENDING, (f"actions/{action}/approval_above: {action} of "
                                         f"{_amount(amount)} is above "
                                         f"{_amount(limits['approval_above'])}: a human must "
                                         "sign off")
    return DecisionOutcome.ALLOW, (f"actions/{action}: {action} of {_amount(amount)} is within "
                                   f"its {' and '.join(reads)}")


def evaluate(spec: dict[str, Any], request: DecisionRequest, agent: Agent,
             now: datetime) -> tuple[str, str]:
    """(outcome, rule) for a request against the effective desired state and live windows; the
    rule names the part of the spec that decided (docs/decisions.md)."""
    if agent.lifecycle != Lifecycle.ACTIVE:
        return DecisionOutcome.DENY, f"lifecycle: {agent.name} is {agent.lifecycle}"
    tools = callable_tools(spec)
    tool, resource = request.tool, request.resource
    if tool and tool not in tools:
        return DecisionOutcome.DENY, f"tools: tool {tool} is not approved"
    if resource and resource not in {d["resource"] for d in spec["data"]}:
        return DecisionOutcome.DENY, f"data: resource {resource} is not approved"
    if request.amounts_disagree:
        return DecisionOutcome.DENY, (f"amount: {request.amount_problem}, so the call could do "
                                      "other than what is judged")
    if resource:
        probe = Event(id="decision-probe", agent=agent.name, ts=now, kind="data_access",
                      resource=resource, record=request.record)
        durations = {limit["per"]: duration_seconds(limit["per"]) for limit in spec["limits"]}
        checks = window_checks(spec, probe, agent.pk, durations)
        try:
            if checks:  # windows hold every stored event first (adopted, refilled)
                ensure_windows([agent], now)
            seen = [windows.peek(check, now) for check in checks]
        except redis.RedisError:
            return DecisionOutcome.DENY, (f"{checks[0].rule}: the window cannot be read right "
                                          "now, so the answer is no (fail closed)")
        for check, count in zip(checks, seen, strict=True):
            if count + 1 > check.limit:
                return DecisionOutcome.DENY, f"{check.rule} (the window is full)"
    if request.action:
        return _action_rule(spec, request, tools)
    return DecisionOutcome.ALLOW, f"data/{resource}: an approved resource within its limits"


def _person_behind(actor: Any) -> Any:
    """The person an agent's token belongs to, or the person asking; None for the system."""
    token = getattr(actor, "token", None) if acting_agent(actor) is not None else None
    if token is not None:
        return token.user
    return actor if getattr(actor, "pk", None) else None


@transaction.atomic
def request_decision(agent: Agent, request: DecisionRequest | dict[str, Any], *, actor: Any,
                     callback_url: str = "") -> Decision:
    """Decide now, or open an escalation for an approver and wait (pending) until the
    earlier of the server's timeout and the asking agent's `wait_seconds`."""
    if agent.active_version_id is None:
        raise Conflict(f"{agent.name} has no approved desired state.", code="not_approved")
    asked = request if isinstance(request, DecisionRequest) else _parsed(request)
    callback_url = callback_url or asked.callback_url
    request = asked.to_dict()
    now = timezone.now()
    stopped = holds.stop_reason(agent)
    outcome, rule = ((DecisionOutcome.DENY, stopped) if stopped is not None
                     else evaluate(desired_now(agent, now), asked, agent, now))
    approvals = 1
    if outcome != DecisionOutcome.DENY:
        try:
            blocked = decision_block(agent, now)
        except redis.RedisError:
            blocked = ("the group rules' windows cannot be read right now, so the answer is "
                       "no (fail closed)")
        if blocked is not None:
            outcome, rule = DecisionOutcome.DENY, blocked
    if outcome != DecisionOutcome.DENY and request.get("action"):
        try:
            held = decision_hold(agent, request, now)
        except redis.RedisError:
            held = None
            outcome, rule = DecisionOutcome.DENY, ("the group rules' windows cannot be read "
                                                   "right now, so the answer is no (fail "
                                                   "closed)")
        if held is not None:
            outcome, (rule, approvals) = DecisionOutcome.PENDING, held
    pending = outcome == DecisionOutcome.PENDING
    decision = Decision.objects.create(
        agent=agent, request=request, request_sha256=state_hash(request), outcome=outcome,
        status=DecisionStatus.PENDING if pending else DecisionStatus.DECIDED, rule=rule,
        callback_url=callback_url, generation=agent.generation, created_at=now,
        asked_by=_person_behind(actor), required_approvals=approvals,
        expires_at=now + timedelta(seconds=_wait(asked)) if pending else None)
    audit.record(actor=actor, action=AuditAction.DECISION_MADE, target=f"decision:{decision.pk}",
                 agent=agent.name, after={"request": request, "outcome": outcome}, reason=rule)
    if pending:
        escalation = Escalation.objects.create(agent=agent, decision=decision,
                                               reason=f"decision pending: {rule}")
        audit.record(actor=SYSTEM, action=AuditAction.ESCALATION_OPENED,
                     target=f"escalation:{escalation.pk}", agent=agent.name,
                     after={"decision": str(decision.pk)}, reason=escalation.reason)
        alert(AlertKind.DECISION_PENDING, agent, decision=str(decision.pk),
              escalation=escalation.pk, message=rule, severity="high")
        refresh_status(agent, now=now, if_free=True)  # awaiting a human, on its page at once
        _schedule_expiry(decision)
    return decision


def _parsed(raw: dict[str, Any]) -> DecisionRequest:
    try:
        return parse_request(raw)
    except RequestError as error:
        raise Malformed(error.message, details=[{"pointer": error.pointer,
                                                 "message": error.message}]) from None


def _wait(request: DecisionRequest) -> float:
    """How long a pending decision waits: the server's timeout, or less when the asking agent
    will not wait that long (the approver's countdown shows the earlier)."""
    timeout = float(settings.DECISION_TIMEOUT_SECONDS)
    return min(timeout, request.wait_seconds) if request.wait_seconds else timeout


def _schedule_expiry(decision: Decision) -> None:
    def schedule() -> None:
        queues.queue("default").enqueue_at(
            not_before(decision.expires_at), "runtime.jobs.expire_decision_job", str(decision.pk))

    transaction.on_commit(schedule, robust=True)


def _close(decision: Decision, *, actor: Any, status: str, outcome: str, comment: str) -> None:
    now = timezone.now()
    decision.status, decision.outcome = status, outcome
    decision.decided_at = now
    decision.comment = comment
    if getattr(actor, "pk", None) and not isinstance(actor, str):
        decision.decided_by = actor
    webhooks.send_when_decided(decision, now)  # the agent's webhook, sent once this commits
    decision.save()
    Escalation.objects.filter(decision=decision, status=EscalationStatus.OPEN).update(
        status=EscalationStatus.RESOLVED, resolution=outcome, comment=comment,
        resolved_by=decision.decided_by, resolved_at=now)
    audit.record(actor=actor, target=f"decision:{decision.pk}", agent=decision.agent.name,
                 action=AuditAction.DECISION_EXPIRED if status == DecisionStatus.EXPIRED
                 else AuditAction.DECISION_DECIDED,
                 after={"outcome": outcome, "status": status}, reason=comment)
    alert(AlertKind.ESCALATION_RESOLVED, decision.agent, decision=str(decision.pk),
          resolution=outcome)
    # No longer awaiting a human: its health says so now, and a pass settles its conditions
    # (a quiet agent sends no report that would ask for one; the status row a settling pass
    # holds is left to that pass and to this one).
    refresh_status(decision.agent, now=now, if_free=True)
    request_reconcile(decision.agent_id, Trigger.ESCALATION)


def decide_pending(decision_id: str, *, actor: Any, allow: bool, comment: str) -> Decision:
    """An approver answers a pending decision (never for an agent they own). An answer that
    comes after the decision's expiry is refused (409 expired) once the decision's closing as
    expired has committed: the refusal does not roll it back."""
    decision = answer_pending(decision_id, actor=actor, allow=allow, comment=comment)
    if decision.status == DecisionStatus.EXPIRED:
        raise Conflict(too_late(decision), code="expired")
    return decision


@transaction.atomic
def answer_pending(decision_id: str, *, actor: Any, allow: bool, comment: str) -> Decision:
    """decide_pending's change, in a transaction of its own or the caller's: an answer that
    came after the expiry closes the decision as expired and returns it so (status expired),
    for the caller to refuse after its transaction commits."""
    if not has_role(actor, Role.APPROVER) or not getattr(actor, "pk", None):
        raise NotAllowed("Only approvers answer pending decisions.")
    decision = (Decision.objects.select_for_update(no_key=True, of=("self",))
                .select_related("agent").filter(pk=decision_id).first())
    if decision is None:
        raise NotFound(f"No decision {decision_id}.")
    if decision.agent.owner_id == actor.pk:
        raise NotAllowed("Four eyes: you cannot sign off an action of an agent you own.",
                         code="four_eyes")
    if decision.asked_by_id == actor.pk:
        raise NotAllowed("Four eyes: you asked for this, yourself or through an agent token "
                         "you hold; another approver answers it.", code="four_eyes")
    # Who may answer, and whether there is anything to answer, before what was sent.
    if not comment.strip():
        raise Invalid("Answering a decision needs a comment.",
                      details=[{"pointer": "/comment", "message": "required"}])
    if decision.status != DecisionStatus.PENDING:
        raise Conflict(f"Decision {decision_id} is {decision.status}.", code="not_pending")
    if decision.expires_at and decision.expires_at <= timezone.now():
        _close(decision, actor=SYSTEM, status=DecisionStatus.EXPIRED,
               outcome=DecisionOutcome.DENY, comment="nobody answered in time")
        return decision
    if allow and (stopped := holds.stop_reason(decision.agent)) is not None:
        raise Conflict(f"{decision.agent.name} is stopped ({stopped}): nothing it asks is "
                       "allowed until the stop is lifted.", code="stopped")
    if allow and decision.required_approvals > 1:
        if actor.username in decision.approvals:
            raise Conflict("You signed this off already; another approver must.",
                           code="already_signed")
        decision.approvals = [*decision.approvals, actor.username]
        if len(decision.approvals) < decision.required_approvals:
            decision.save(update_fields=["approvals"])
            audit.record(actor=actor, action=AuditAction.DECISION_SIGNED,
                         target=f"decision:{decision.pk}", agent=decision.agent.name,
                         after={"approvals": decision.approvals,
                                "required_approvals": decision.required_approvals},
                         reason=comment)
            return decision
    _close(decision, actor=actor,
           status=DecisionStatus.APPROVED if allow else DecisionStatus.REJECTED,
           outcome=DecisionOutcome.ALLOW if allow else DecisionOutcome.DENY, comment=comment)
    return decision


def too_late(decision: Decision) -> str:
    """Why an answer came too late, in the approver's words: the agent is no longer waiting."""
    waited = decision.request.get("wait_seconds")
    who = (f"{decision.agent.name} waited {waited:g} s" if waited
           else f"{decision.agent.name}'s request waited as long as the server allows")
    return (f"Too late: {who} and stopped waiting at {decision.expires_at:%H:%M:%S} UTC. It has "
            "moved on and treated the action as refused, so nothing was allowed; if it is "
            "still needed, the agent asks again.")


@transaction.atomic
def expire_decision(decision_id: str, *, now: datetime | None = None) -> bool:
    """A pending decision past its time becomes deny; True when it expired now."""
    decision = (Decision.objects.select_for_update(no_key=True, of=("self",))
                .select_related("agent").filter(pk=decision_id).first())
    now = now or timezone.now()
    if decision is None or decision.status != DecisionStatus.PENDING or (
            decision.expires_at and decision.expires_at > now):
        return False
    _close(decision, actor=SYSTEM, status=DecisionStatus.EXPIRED,
           outcome=DecisionOutcome.DENY, comment="nobody answered in time")
    return True


def pending_deadline(decision_id: str) -> datetime | None:
    """When a still-pending decision expires; None once it is answered, expired or gone."""
    return (Decision.objects.filter(pk=decision_id, status=DecisionStatus.PENDING)
            .values_list("expires_at", flat=True).first())


def expire_overdue_decisions(*, now: datetime | None = None) -> int:
    """Expire every pending decision past its deadline; the safety net for lost schedules."""
    now = now or timezone.now()
    overdue = Decision.objects.filter(status=DecisionStatus.PENDING, expires_at__lte=now)
    return sum(expire_decision(pk, now=now)
               for pk in overdue.values_list("pk", flat=True))
