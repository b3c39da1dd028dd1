"""Humans resolving escalations, clearing blocks and acknowledging findings."""

import copy
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from config import pointers, queues
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from config.scheduled_time import not_before
from reconciliation.actions.common import alert, audit_label, enforcement_held, suspend_agent
from reconciliation.actions.findings import move_finding, note_acknowledgement
from reconciliation.agent_status import refresh_status
from reconciliation.choices import (
    RESOLUTIONS,
    DecisionStatus,
    EscalationKind,
    EscalationStatus,
    FindingStatus,
    Resolution,
    Trigger,
)
from reconciliation.connectors import ConnectorError, connector_for
from reconciliation.controller.triggers import request_reconcile
from reconciliation.fleet_snapshot import request_refresh
from reconciliation.models import Escalation, Finding
from reconciliation.reconciler.diff import Operation, OperationKind
from reconciliation.reconciler.plan import idempotency_key
from registry import actions as registry_actions
from registry import holds
from registry.choices import Lifecycle, Role, VersionSource, VersionState
from registry.desired_push import announce_desired_change
from registry.intake import read_spec
from registry.models import Agent
from registry.raised_limits import raise_limit
from registry.roles import has_role

log = logging.getLogger(__name__)

# A decision escalation is decided by runtime, which owns runtime decisions: it registers how
# from its AppConfig.ready (decide_decisions_with).
_decision_actions: dict[str, Callable[..., Any]] = {}


def decide_decisions_with(*, answer_pending: Callable[..., Any],
                          too_late: Callable[[Any], str]) -> None:
    """runtime's `answer_pending(decision_id, *, actor, allow, comment)` (which returns the
    decision closed as expired when the answer came too late, for the caller to refuse after
    its transaction commits) and `too_late(decision)` (the refusal's words), once per
    process."""
    _decision_actions.update(answer_pending=answer_pending, too_late=too_late)


def _decisions(name: str) -> Callable[..., Any]:
    if name not in _decision_actions:
        raise ImproperlyConfigured("nobody decides runtime decisions: "
                                   "is runtime in INSTALLED_APPS?")
    return _decision_actions[name]


def open_escalation(agent: Agent, finding: Finding | None, *, reason: str,
                    caused_by: Any = None) -> Escalation | None:
    """Hand a drift to the approvers (once per finding while open); `caused_by` is the person
    behind what caused it, who may not close it (four eyes)."""
    if finding is not None and Escalation.objects.filter(
            finding=finding, status=EscalationStatus.OPEN).exists():
        return None
    escalation = Escalation.objects.create(agent=agent, finding=finding, reason=reason,
                                           caused_by_id=getattr(caused_by, "pk", caused_by))
    if finding is not None:
        move_finding(finding, FindingStatus.ESCALATED, reason=reason, agent=agent)
    audit.record(actor=SYSTEM, action=AuditAction.ESCALATION_OPENED,
                 target=f"escalation:{escalation.pk}", agent=agent.name,
                 after={"finding": finding.to_dict() if finding else None}, reason=reason)
    # One line per incident: the alert of a sibling finding joins its first one's
    # (reconciliation.alerts.FOLDED_EVENTS).
    alert(AlertKind.ESCALATION_OPENED, agent, finding, escalation=escalation.pk, message=reason)
    return escalation


def _check_decider(actor: Any) -> None:
    if not has_role(actor, Role.APPROVER) or not getattr(actor, "pk", None):
        raise NotAllowed("Only approvers resolve escalations.")


def authorise_escalation(escalation_id: int, *, actor: Any, triage: bool = False,
                         lock: bool = False) -> Escalation:
    """The escalation `actor` may resolve (or triage), decided before anything sent is read:
    403 for someone who is not an approver, 404 when there is no such escalation, 403 (four
    eyes) for one about an agent they own."""
    _check_decider(actor)
    rows = Escalation.objects.select_related("agent__active_version", "finding", "decision")
    if lock:
        rows = rows.select_for_update(no_key=True, of=("self",))
    escalation = rows.filter(pk=escalation_id).first()
    if escalation is None:
        raise NotFound(f"No escalation {escalation_id}.")
    verb = "triage" if triage else "resolve"
    if escalation.agent.owner_id == actor.pk:
        # Snoozing or claiming it would keep it from the other approvers who must decide it.
        raise NotAllowed(f"Four eyes: you cannot {verb} an escalation for an agent you own.",
                         code="four_eyes")
    if actor.pk in (escalation.caused_by_id, getattr(escalation.decision, "asked_by_id", None)):
        # an admin may issue a token for anyone's agent: what he did through it, another
        # approver closes
        raise NotAllowed(f"Four eyes: you cannot {verb} an escalation you caused, yourself or "
                         "through an agent token you issued.", code="four_eyes")
    return escalation


WRONG_RESOLUTION = {
    EscalationKind.DECISION: "A pending decision is resolved with allow or deny.",
    EscalationKind.DRIFT: "Drift is resolved with revert, accept or suspend.",
    EscalationKind.RECERTIFICATION: (
        "An overdue review is closed by approving a recertification; meanwhile an approver may "
        "only suspend the agent."),
    EscalationKind.BEHAVIOUR: (
        "What an agent did cannot be reverted or accepted as observed state: behaviour is "
        "resolved with acknowledge (a one-off), suspend, or raise_limit (propose a spec that "
        "allows it)."),
}


def resolve_escalation(escalation_id: int, *, actor: Any, resolution: str,
                       comment: str, with_findings: list[Finding] | None = None) -> Escalation:
    """An approver resolves, with what fits the escalation's kind: drift is reverted, accepted
    into a proposal or the agent suspended; behaviour is acknowledged, the agent suspended, or
    the limit raised in a proposal; a pending decision is allowed or denied. Always with a
    comment; never for an agent they own. Accepting proposes this finding's change only (and
    `with_findings`', the rest of an incident accepted whole), never all that was observed.
    An answer to a decision that expired meanwhile is refused (409 expired) after the
    decision's closing as expired has committed."""
    escalation = settle_escalation(escalation_id, actor=actor, resolution=resolution,
                                   comment=comment, with_findings=with_findings)
    refuse_too_late(escalation)
    return escalation


def refuse_too_late(escalation: Escalation) -> None:
    """The refusal of an answer that came after its decision expired (settle_escalation closed
    the decision as expired instead); call it once that closing has committed."""
    if (expired := getattr(escalation, "too_late", None)) is not None:
        raise Conflict(_decisions("too_late")(expired), code="expired")


@transaction.atomic
def settle_escalation(escalation_id: int, *, actor: Any, resolution: str,
                      comment: str, with_findings: list[Finding] | None = None) -> Escalation:
    """resolve_escalation's change, in a transaction of its own or the caller's; an answer to
    a decision that expired meanwhile closes it as expired and comes back with the decision
    as `too_late`, for refuse_too_late."""
    escalation = authorise_escalation(escalation_id, actor=actor, lock=True)
    if not comment.strip():
        raise Invalid("Resolving an escalation needs a comment.",
                      details=[{"pointer": "/comment", "message": "required"}])
    if resolution not in Resolution.values:
        raise Invalid(f"Unknown resolution {resolution!r}.", details=[
            {"pointer": "/resolution", "message": f"one of {', '.join(Resolution.values)}"}])
    resolution = Resolution(resolution)
    agent = escalation.agent
    kind = escalation.kind
    if escalation.status != EscalationStatus.OPEN:
        if kind == EscalationKind.DECISION and escalation.decision.status == DecisionStatus.EXPIRED:
            raise Conflict(_decisions("too_late")(escalation.decision), code="expired")
        raise Conflict(f"Escalation {escalation_id} is already resolved.", code="not_open")
    if resolution not in RESOLUTIONS[kind]:  # a limit that cannot be raised says why below
        raise Invalid(WRONG_RESOLUTION[kind], code="wrong_resolution", details=[
            {"pointer": "/resolution",
             "message": f"a {kind} escalation takes {', '.join(RESOLUTIONS[kind])}"}])
    if kind == EscalationKind.DECISION:
        decision = _decisions("answer_pending")(str(escalation.decision_id), actor=actor,
                                                allow=resolution == Resolution.ALLOW,
                                                comment=comment)
        escalation.refresh_from_db()
        if decision.status == DecisionStatus.EXPIRED:
            escalation.too_late = decision
        return escalation
    finding = escalation.finding
    now = timezone.now()
    if kind == EscalationKind.BEHAVIOUR:
        outcome = _resolve_behaviour(escalation, finding, resolution, actor=actor,
                                     comment=comment, now=now)
    else:
        outcome = _resolve_drift(escalation, finding, resolution, actor=actor, comment=comment,
                                 with_findings=with_findings)
    escalation.status = EscalationStatus.RESOLVED
    escalation.resolution = resolution
    escalation.comment = comment
    escalation.resolved_by = actor
    escalation.resolved_at = now
    escalation.save()
    audit.record(actor=actor, action=AuditAction.ESCALATION_RESOLVED,
                 target=f"escalation:{escalation.pk}", agent=agent.name,
                 after={"resolution": resolution.value, **outcome}, reason=comment)
    alert(AlertKind.ESCALATION_RESOLVED, agent, finding, escalation=escalation.pk,
          resolution=resolution.value)
    # accepting proposes (the agent's row is held): a settling pass's status row is left to it
    refresh_status(agent, now=now, if_free=True)
    request_reconcile(agent.pk, Trigger.ESCALATION)
    return escalation


def _resolve_drift(escalation: Escalation, finding: Finding | None, resolution: Resolution, *,
                   actor: Any, comment: str,
                   with_findings: list[Finding] | None = None) -> dict[str, Any]:
    """Configuration drift: back to the loop as a correction, into a proposal (of this
    finding's change, and of `with_findings`' when an incident is accepted whole), or
    suspend."""
    agent = escalation.agent
    if resolution == Resolution.REVERT:
        if finding is not None:
            # Back to the loop as an ordinary correction, whatever the area's mode says.
            move_finding(finding, FindingStatus.OPEN, attempts=0, revert_ordered=True,
                         actor=actor, agent=agent, reason=f"revert ordered by {actor.username}")
        return {}
    if resolution == Resolution.ACCEPT:
        latest = agent.observations.order_by("-observed_at").first()
        if latest is None:
            raise Conflict("There is no observed state to accept.", code="no_observation")
        findings = [finding, *(with_findings or [])] if finding is not None else []
        if not findings:
            raise Conflict("This escalation has no finding whose change could be accepted; "
                           "revert or suspend.", code="nothing_to_accept")
        spec = accepted_spec(agent.active_version.spec, latest.state,
                             [f.pointer for f in findings])
        outcome = registry_actions.propose(
            agent, read_spec(spec), agent.active_version.metadata, actor=actor,
            source=VersionSource.UI, comment=f"accepted from escalation {escalation.pk}",
            from_escalation=True)
        move_finding(
            finding, FindingStatus.ACCEPTED, proposal=outcome.version, actor=actor, agent=agent,
            reason="accepted into a proposal: held until it is approved or refused")
        return {"proposal": outcome.version.pk}
    suspend_agent(agent, actor=actor, reason=f"escalation {escalation.pk}: {comment}")
    if finding is not None:
        move_finding(finding, FindingStatus.BLOCKED, reason="suspended by an approver",
                     actor=actor, agent=agent)
    return {}


def _tokens(pointer: str) -> list[str]:
    return pointers.tokens(pointer)


def _keyed(entries: list, key: str, name: str) -> dict | None:
    return next((e for e in entries if isinstance(e, dict) and e.get(key) == name), None)


def _replace(entries: list, key: str, name: str, taken: dict | None) -> list:
    """`entries` with the one named `name` replaced by `taken` (or dropped when None)."""
    kept = [e for e in entries if not (isinstance(e, dict) and e.get(key) == name)]
    return sorted([*kept, *([copy.deepcopy(taken)] if taken is not None else [])],
                  key=lambda e: e.get(key, ""))


def _take(spec: dict[str, Any], seen: dict[str, Any], tokens: list[str]) -> None:
    """Make the one place `tokens` points at in `spec` what it is in `seen` (the observed
    state as a spec), leaving every other part of the spec as approved."""
    head, rest = (tokens[0], tokens[1:]) if tokens else ("", [])
    if head == "tools" and len(rest) == 1:
        tools = set(spec.get("tools", [])) - {rest[0]}
        spec["tools"] = sorted(tools | ({rest[0]} & set(seen.get("tools", []))))
    elif head == "data" and len(rest) == 1:
        spec["data"] = _replace(spec.get("data", []), "resource", rest[0],
                                _keyed(seen.get("data", []), "resource", rest[0]))
    elif head == "actions" and len(rest) == 2 and rest[1] in ("approval_above", "max"):
        rule = dict(spec.get("actions", {}).get(rest[0]) or {"approval_above": None,
                                                              "max": None})
        rule[rest[1]] = (seen.get("actions", {}).get(rest[0]) or {}).get(rest[1])
        actions = dict(spec.get("actions", {}))
        actions.pop(rest[0], None)
        if any(value is not None for value in rule.values()):
            actions[rest[0]] = rule
        spec["actions"] = actions
    elif head == "limits" and len(rest) == 2:
        resource, metric = rest
        kept = [e for e in spec.get("limits", []) if not (e.get("resource") == resource
                                                          and metric in e)]
        taken = [{"resource": resource, metric: e[metric], "per": e.get("per", "1h")}
                 for e in seen.get("limits", [])
                 if isinstance(e, dict) and e.get("resource") == resource and metric in e][:1]
        spec["limits"] = [*kept, *taken]
    elif head in ("model", "version") and not rest and seen.get(head) is not None:
        spec[head] = seen[head]
    elif head == "mcp_servers" and rest:
        _take_mcp(spec, seen, rest)
    else:
        raise Conflict(f"The change at {'/' + '/'.join(tokens)} cannot be accepted into the "
                       "spec; revert it or suspend the agent.", code="nothing_to_accept")


def _take_mcp(spec: dict[str, Any], seen: dict[str, Any], rest: list[str]) -> None:
    """A whole server, its address, or one of its tools, as observed."""
    servers = spec.get("mcp_servers", [])
    server = _keyed(seen.get("mcp_servers", []), "name", rest[0])
    approved = _keyed(servers, "name", rest[0])
    if len(rest) == 1 or approved is None or server is None:
        taken = server
    elif len(rest) == 3 and rest[1] == "tools":
        taken = {**approved, "tools": _replace(approved.get("tools", []), "name", rest[2],
                                               _keyed(server.get("tools", []), "name",
                                                      rest[2]))}
    else:  # /url or /command moved
        taken = {**approved, rest[1]: server.get(rest[1])}
    spec["mcp_servers"] = _replace(servers, "name", rest[0], taken)
    if not spec["mcp_servers"]:
        del spec["mcp_servers"]


def accepted_spec(approved: dict[str, Any], observed: dict[str, Any],
                  pointers: list[str]) -> dict[str, Any]:
    """The approved spec with only the changes at `pointers` (the accepted findings') taken
    from the observed state: accepting one finding never carries another drift along."""
    seen = {key: observed[key] for key in ("tools", "data", "actions", "limits", "model",
                                           "version") if key in observed}
    if isinstance(observed.get("mcp_servers"), list):
        seen["mcp_servers"] = _accepted_mcp_servers(approved.get("mcp_servers", []),
                                                    observed["mcp_servers"])
    spec = copy.deepcopy(dict(approved))
    for pointer in pointers:
        _take(spec, seen, _tokens(pointer))
    return spec


def _accepted_mcp_servers(approved: list[dict], observed: list[dict]) -> list[dict]:
    """The observed MCP servers as spec entries: where the observation does not say how a
    server is reached, the approved entry does. A tool seen without a fingerprint stays
    without one, so the proposal is refused as invalid rather than approving it unpinned."""
    known = {server["name"]: server for server in approved}
    servers = []
    for seen in observed:
        was = known.get(seen["name"], {})
        server = {"name": seen["name"], "transport": seen.get("transport", was.get("transport"))}
        for key in ("url", "command"):
            if seen.get(key) or was.get(key):
                server[key] = seen.get(key) or was.get(key)
        server["tools"] = [{key: tool[key] for key in ("name", "fingerprint", "description")
                            if key in tool} for tool in seen.get("tools", [])]
        for primitive, name in (("prompts", "name"), ("resources", "uri"),
                                ("resource_templates", "uri_template")):
            # what the observation does not list stays as approved
            items = seen.get(primitive, was.get(primitive, []))
            if items:
                server[primitive] = [{key: item[key] for key in (name, "fingerprint",
                                                                 "description") if key in item}
                                     for item in items]
        for flag in ("allow_sampling", "allow_elicitation"):  # never observed: as approved
            if was.get(flag):
                server[flag] = True
        servers.append(server)
    return servers


def _resolve_behaviour(escalation: Escalation, finding: Finding, resolution: Resolution, *,
                       actor: Any, comment: str, now: datetime) -> dict[str, Any]:
    """Behaviour already happened: allow it this once, stop the agent, or propose a spec that
    allows it (four-eyes approval as for any proposal)."""
    agent = escalation.agent
    if resolution == Resolution.ACKNOWLEDGE:
        move_finding(
            finding, FindingStatus.ACKNOWLEDGED, at=now, acknowledged_by=actor, actor=actor,
            agent=agent, why=comment,
            reason=f"acknowledged by {actor.username} as a one-off: {comment}"[:2000])
        return {"finding": {"status": finding.status}}
    if resolution == Resolution.SUSPEND:
        return _suspend_for_behaviour(escalation, finding, actor=actor, comment=comment)
    return _raise_limit(escalation, finding, actor=actor)


def _suspend_for_behaviour(escalation: Escalation, finding: Finding, *, actor: Any,
                           comment: str) -> dict[str, Any]:
    """Suspend through the connector as enforcement mode block does; under shadow mode or a
    tripped breaker the suspension is recorded, not applied."""
    agent = escalation.agent
    operation = Operation(OperationKind.SUSPEND, "agent")
    key = idempotency_key(agent.name, agent.generation, operation, finding.pk)
    held = enforcement_held(agent)
    if held:
        reason = f"suspend ordered by {actor.username}, not applied: {held}"
        move_finding(finding, FindingStatus.LOGGED, reason=reason, actor=actor, agent=agent)
        audit.record(actor=actor, action=AuditAction.CORRECTION_SHADOWED,
                     target=f"agent:{agent.name}", agent=agent.name,
                     after={**operation.to_dict(), "key": key}, reason=reason)
        return {"finding": {"status": FindingStatus.LOGGED}, "applied": False, "held": held}
    suspend_agent(agent, actor=actor, reason=f"escalation {escalation.pk}: {comment}")
    move_finding(finding, FindingStatus.BLOCKED, reason=f"suspended by {actor.username}",
                 actor=actor, agent=agent)
    transaction.on_commit(lambda: _tell_connector(agent, operation, key), robust=True)
    return {"finding": {"status": FindingStatus.BLOCKED}, "applied": True, "key": key}


def _tell_connector(agent: Agent, operation: Operation, key: str) -> None:
    try:
        connector_for(agent).apply(agent, operation.to_dict(), key)
    except ConnectorError as error:
        # The agent is suspended in the desired state; the pass queued with the resolution
        # corrects a platform still running it (a suspension is always corrected).
        log.warning("suspending %s through its connector failed: %s", agent.name, error.detail)


def _raise_limit(escalation: Escalation, finding: Finding, *, actor: Any) -> dict[str, Any]:
    """Propose the approved spec with the broken limit raised to what was seen (on top of the
    approver's own pending proposal for the agent, so several raises make one proposal)."""
    agent = escalation.agent
    if agent.active_version is None:
        raise Conflict(f"{agent.name} has no approved desired state.", code="not_approved")
    mine = (agent.versions.filter(state=VersionState.PENDING, proposed_by=actor)
            .order_by("-created_at").first())
    base = mine or agent.active_version
    try:
        spec, change = raise_limit(base.spec, finding.kind, finding.pointer, finding.actual)
    except ValueError as error:
        raise Invalid(f"Nothing to raise: {error}.", code="nothing_to_raise", details=[
            {"pointer": "/resolution", "message": str(error)}]) from None
    outcome = registry_actions.propose(
        agent, read_spec(spec), base.metadata, actor=actor, source=VersionSource.UI,
        comment=f"from escalation {escalation.pk}: {change}", from_escalation=True)
    reason = f"{change}: proposal {outcome.version.pk}, held until it is approved or refused"
    move_finding(finding, FindingStatus.ACCEPTED, proposal=outcome.version, reason=reason,
                 actor=actor, agent=agent)
    return {"finding": {"status": FindingStatus.ACCEPTED}, "proposal": outcome.version.pk,
            "change": change}


@transaction.atomic
def resume_agent(agent: Agent, *, actor: Any, reason: str) -> None:
    """A human clears a block: the agent is active again and its blocked findings resolved."""
    if not (has_role(actor, Role.APPROVER) or has_role(actor, Role.COMPLIANCE)):
        raise NotAllowed("Only approvers or compliance staff clear a block.")
    if not reason.strip():
        raise Invalid("Clearing a block needs a reason.",
                      details=[{"pointer": "/reason", "message": "required"}])
    if (stopped := holds.stop_reason(agent)) is not None:
        raise Conflict(f"{agent.name} is stopped ({stopped}): it runs again when two people "
                       "lift the stop.", code="stopped")
    updated = Agent.objects.filter(pk=agent.pk, lifecycle=Lifecycle.SUSPENDED).update(
        lifecycle=Lifecycle.ACTIVE, updated_at=timezone.now())
    if not updated:
        raise Conflict(f"{agent.name} is not suspended.", code="not_suspended")
    announce_desired_change(agent.name)
    request_refresh()  # the fleet view's compliance timeline shows suspensions
    cleared = list(Finding.objects.select_for_update(no_key=True).filter(
        agent=agent, status=FindingStatus.BLOCKED).order_by("pk"))
    for finding in cleared:
        # One row per finding: the compliance timeline reads when each drift stopped counting.
        move_finding(finding, FindingStatus.RESOLVED, actor=actor, agent=agent, why=reason,
                     reason=f"cleared by {audit_label(actor)}: {reason}")
    audit.record(actor=actor, action=AuditAction.AGENT_RESUMED, target=f"agent:{agent.name}",
                 agent=agent.name, before={"lifecycle": "suspended"},
                 after={"lifecycle": "active"}, reason=reason)
    request_reconcile(agent.pk, Trigger.MANUAL)


def authorise_acknowledgement(finding_id: int, *, actor: Any, lock: bool = False) -> Finding:
    """The finding compliance may acknowledge: 403 for anyone else, then 404 when missing."""
    if not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed("Only compliance staff acknowledge findings.")
    rows = Finding.objects.select_related("agent")
    finding = (rows.select_for_update(no_key=True, of=("self",)) if lock else rows).filter(
        pk=finding_id).first()
    if finding is None:
        raise NotFound(f"No finding {finding_id}.")
    return finding


@transaction.atomic
def acknowledge_finding(finding_id: int, *, actor: Any, reason: str) -> Finding:
    """Compliance acknowledges a finding with a reason (it stays in the record)."""
    finding = authorise_acknowledgement(finding_id, actor=actor, lock=True)
    if not reason.strip():
        raise Invalid("Acknowledging needs a reason.",
                      details=[{"pointer": "/reason", "message": "required"}])
    if finding.status == FindingStatus.CORRECTED:
        raise Conflict(f"Finding {finding_id} is corrected: there is nothing left to "
                       "acknowledge.", code="corrected")
    finding.acknowledged_by = actor
    finding.acknowledged_at = timezone.now()
    finding.save(update_fields=["acknowledged_by", "acknowledged_at"])
    note_acknowledgement(finding, actor=actor, reason=reason)
    return finding


SNOOZE_LIMIT = timedelta(days=7)


@transaction.atomic
def triage_escalation(escalation_id: int, *, actor: Any, assign: bool = False,
                      acknowledge: bool = False, snooze_for: timedelta | None = None,
                      snooze_until: datetime | None = None) -> Escalation:
    """An approver takes an escalation (assign to me), acknowledges it, or snoozes it for a
    while or until a time (in the future, at most 7 days away); it comes back on its own."""
    authorise_escalation(escalation_id, actor=actor, triage=True)
    now = timezone.now()
    if snooze_for is not None and snooze_until is not None:
        raise Invalid("Snooze for a while or until a time, not both.",
                      details=[{"pointer": "/snooze_until", "message": "one of the two"}])
    if snooze_for is not None:
        snooze_until = now + snooze_for
    if snooze_until is not None:
        if timezone.is_naive(snooze_until):
            raise Invalid("A snooze time needs its time zone.",
                          details=[{"pointer": "/snooze_until", "message": "with an offset"}])
        if snooze_until <= now:
            raise Invalid("Snooze until a time in the future.",
                          details=[{"pointer": "/snooze_until", "message": "in the future"}])
        if snooze_until > now + SNOOZE_LIMIT:
            raise Invalid("Snooze for at most 7 days.",
                          details=[{"pointer": "/snooze_until", "message": "at most 7 days"}])
    escalation = authorise_escalation(escalation_id, actor=actor, triage=True, lock=True)
    if escalation.status != EscalationStatus.OPEN:
        raise Conflict(f"Escalation {escalation_id} is not open.", code="not_open")
    before = _triage_state(escalation)
    if assign:
        escalation.assignee = actor
    if acknowledge:
        escalation.acknowledged_at = now
    if snooze_until is not None:
        escalation.snoozed_until = snooze_until
        transaction.on_commit(lambda: _schedule_wake(escalation.pk, snooze_until), robust=True)
    escalation.save()
    audit.record(actor=actor, action=AuditAction.ESCALATION_TRIAGED,
                 target=f"escalation:{escalation.pk}", agent=escalation.agent.name,
                 before=before, after=_triage_state(escalation))
    if snooze_until is not None:
        # Other approvers' inbox counts drop now; the wake-up alert raises them again.
        alert(AlertKind.ESCALATION_SNOOZED, escalation.agent, escalation=escalation.pk,
              until=snooze_until.isoformat())
    return escalation


def _triage_state(escalation: Escalation) -> dict[str, Any]:
    return {"assignee": escalation.assignee_id,
            "acknowledged": bool(escalation.acknowledged_at),
            "snoozed_until": escalation.snoozed_until.isoformat()
            if escalation.snoozed_until else None}


def _schedule_wake(escalation_id: int, until: datetime) -> None:
    # by its dotted path: reconciliation.jobs imports this module
    queues.queue("default").enqueue_at(
        not_before(until), "reconciliation.jobs.wake_escalation_job", escalation_id)


@transaction.atomic
def announce_awake(escalation_id: int) -> bool:
    """A snoozed escalation whose time came is back in the queue by itself (the queue filters
    on the time); this only tells the approvers' inboxes so their counts go up live. Changes
    no state, so it writes an alert and no audit row. True when it announced."""
    escalation = Escalation.objects.select_related("agent").filter(pk=escalation_id).first()
    if escalation is None or escalation.status != EscalationStatus.OPEN or (
            escalation.snoozed_until is None or escalation.is_snoozed):
        return False  # resolved meanwhile, or snoozed again (that snooze has its own wake-up)
    alert(AlertKind.ESCALATION_WOKE, escalation.agent, escalation=escalation.pk,
          message=f"back from snooze: {escalation.reason}")
    return True
