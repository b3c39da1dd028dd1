"""Correct, the fourth stage: the drift found is recorded as findings, then what the plan
decided is done about each step (applied under its idempotency key, recorded under shadow mode
or a tripped breaker, logged, waived, escalated, or the agent blocked); and the breakers that
hold corrections when too much of the fleet drifts at once."""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, QuerySet
from django.utils import timezone

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from config.times import parse_timestamp
from reconciliation import alerts
from reconciliation.actions.common import suspend_agent
from reconciliation.actions.escalations import open_escalation
from reconciliation.actions.findings import move_finding, open_finding
from reconciliation.agent_status import refresh_status
from reconciliation.choices import (
    TEAM_LABEL,
    BreakerScope,
    CorrectionResult,
    FindingStatus,
    Trigger,
)
from reconciliation.connectors import ConnectorError, CorrectionRefused
from reconciliation.models import BreakerTrip, ControlState, Correction, Finding
from reconciliation.reconciler.diff import Drift, Operation, OperationKind
from reconciliation.reconciler.observe import Observed
from reconciliation.reconciler.pass_context import PassContext
from reconciliation.reconciler.plan import Decision, idempotency_key
from registry import holds
from registry.choices import Lifecycle
from registry.models import Agent
from registry.waivers import is_waived


@dataclass
class Corrected:
    """What the pass changed on the platform, and the platform's error that stopped it."""

    changes: list[dict[str, Any]] = field(default_factory=list)
    error: ConnectorError | None = None
    # the end of the maintenance window that held some of its corrections (they run then)
    held_until: datetime | None = None


def correct(seen: Observed, decision: Decision, *,
            still_held: Callable[[], None] | None = None) -> Corrected:
    """Record the drift found and carry out the decision. `still_held`, from the controller,
    raises when the pass may no longer change anything (its lock was lost); it is asked before
    each change (a pass run outside a controller, by a test or a command, holds no lock)."""
    still_held = still_held or _not_locked
    done = Corrected()
    if not decision.drifts:
        return done
    ctx = seen.ctx
    findings = _detect(ctx, decision)  # committed: the drift is announced before any more work
    done.held_until, decision = _record(seen, decision, findings)
    try:
        for step in decision.apply:
            still_held()  # a pass that lost its lock stops before its next change
            try:
                outcome = seen.connector.apply(ctx.agent, step.operation.to_dict(), step.key)
            except CorrectionRefused as refused:  # not safe to make, or not ours to make
                _refused(ctx, findings[step.drift.fingerprint], step, str(refused))
                continue
            _applied(ctx, findings[step.drift.fingerprint], step, outcome)
            done.changes.append({**step.operation.to_dict(), "key": step.key,
                                 "outcome": outcome})
        blocked = [findings[d.fingerprint] for d in decision.block]
        if blocked:
            still_held()
            done.changes.extend(_block(ctx, seen.connector, blocked))
    except ConnectorError as error:
        with transaction.atomic():
            _failed(ctx, decision, str(error))
        done.error = error
    return done


def _not_locked() -> None:
    """Nothing to lose: the pass holds no lock."""


@transaction.atomic
def _detect(ctx: PassContext, decision: Decision) -> dict[str, Finding]:
    """The drift found, as findings (new ones announced as `drift.detected`), in a transaction
    of its own: the detection reaches the people watching without waiting on the breakers,
    the holds and the steps below. A crash after it leaves open findings that the next pass
    (level-triggered) carries on from."""
    return _upsert_findings(ctx, decision.drifts, {d.fingerprint for d in decision.regressed})


@transaction.atomic
def _record(seen: Observed, decision: Decision, findings: dict[str, Finding]
            ) -> tuple[datetime | None, Decision]:
    """Every step that needs no platform call: shadowed, pending, logged, waived, escalated;
    and the end of the maintenance window that held some of the plan's corrections, if one
    did. The cluster's row is locked only here, when there is drift (a converged fleet's
    passes never wait on each other). `findings` is refreshed in place, for the steps after.
    Returns that end, and the decision the steps after carry out: without the findings a
    person moved since they were announced (accepted, resolved, acknowledged), since the
    plan was made before the person acted; the next pass decides from what is then."""
    ctx = seen.ctx
    control = ControlState.objects.select_for_update(no_key=True).get(pk=seen.control.pk)
    announced = {fingerprint: f.status for fingerprint, f in findings.items()}
    # held again, as they are now; the steps after this transaction carry on with these
    for finding in Finding.objects.select_for_update(no_key=True).filter(
            pk__in=[f.pk for f in findings.values()]):
        finding.agent = ctx.agent
        findings[finding.fingerprint] = finding
    moved = {fingerprint for fingerprint, f in findings.items()
             if f.status != announced[fingerprint]}
    if moved:
        decision = decision.without(moved)
    # drift recorded, fixes wait for the window's end
    held_until = holds.hold_for_window(ctx.agent, ctx.now, decision, findings)
    if seen.was_converged and ctx.trigger != Trigger.APPROVED:
        ControlState.objects.filter(pk=control.pk).update(
            post_convergence_drift=F("post_convergence_drift") + 1)
    _check_breaker(ctx, control)
    for step in decision.shadow:
        _shadow(ctx, findings[step.drift.fingerprint], step)
    for step in decision.apply:
        _pending(ctx, findings[step.drift.fingerprint], step)
    for drift in decision.log:
        _log(ctx, findings[drift.fingerprint])
    for drift in decision.waived:
        _waive(ctx, findings[drift.fingerprint], seen.waivers)
    for drift, reason in decision.escalate:
        open_escalation(ctx.agent, findings[drift.fingerprint], reason=reason)
    refresh_status(ctx.agent, now=ctx.now)  # the agent's health says so before any apply
    return held_until, decision


def _drifting_counted(drifted: QuerySet[Agent], *, capped: bool) -> int:
    """Drifting agents as a breaker counts them. `capped` (the cluster, a team): the owner
    with the most drifting agents counts for at most as many as all the other owners
    together, so one owner drifting their own agents never trips a breaker for others."""
    per_owner = list(drifted.order_by().values("owner_id").annotate(n=Count("pk"))
                     .values_list("n", flat=True))
    total = sum(per_owner)
    if not capped or not per_owner:
        return total
    largest = max(per_owner)
    return total - max(0, largest - (total - largest))


def _check_breaker(ctx: PassContext, control: ControlState) -> None:
    """Trip the cluster's breaker, and the agent's owner's and team's, when too many of their
    agents drifted within the window; each scope pauses automatic correction of its agents."""
    window = ctx.now - timedelta(seconds=settings.BREAKER_WINDOW_SECONDS)
    members = Agent.objects.filter(lifecycle=Lifecycle.ACTIVE, active_version__isnull=False)
    resets = control.breaker_resets or {}

    def drifted_since(scope: str) -> QuerySet[Agent]:
        """Agents with findings in the window and, once the scope was reset, after the reset
        (the wave compliance reset it on never trips it again; a new one does)."""
        found = Finding.objects.filter(detected_at__gte=window, behaviour=False)
        if reset := resets.get(scope):
            found = found.filter(detected_at__gt=parse_timestamp(reset))
        return members.filter(pk__in=found.values("agent_id"))

    owner = ctx.agent.owner
    scopes = [(BreakerScope.GLOBAL, "", {}, True),
              (BreakerScope.OWNER, owner.username, {"owner_id": owner.pk}, False)]
    team = (ctx.agent.labels or {}).get(TEAM_LABEL)
    if team:
        # A key lookup works on PostgreSQL and SQLite alike (as the agent filters do).
        scopes.append((BreakerScope.TEAM, team, {f"labels__{TEAM_LABEL}": team}, True))
    tripped = set(BreakerTrip.objects.filter(scope__in=[f"{kind}:{name}" for kind, name, *_
                                                        in scopes[1:]])
                  .values_list("scope", flat=True))
    if control.breaker_tripped_at is not None:
        tripped.add(str(BreakerScope.GLOBAL))
    for kind, name, where, capped in scopes:
        if (f"{kind}:{name}" if name else str(kind)) in tripped:
            continue  # already paused until compliance resets it
        total = members.filter(**where).count()
        if kind == BreakerScope.GLOBAL and total < settings.BREAKER_MIN_AGENTS:
            continue
        scope = f"{kind}:{name}" if name else str(kind)
        drifting = _drifting_counted(drifted_since(scope).filter(**where), capped=capped)
        if kind != BreakerScope.GLOBAL and drifting < settings.BREAKER_SCOPE_MIN_DRIFTING:
            continue
        if drifting * 100 > total * settings.BREAKER_SHARE_PERCENT:
            _trip(ctx, control, kind, name, drifting, total)


def _trip(ctx: PassContext, control: ControlState, kind: str, name: str, drifting: int,
          total: int) -> None:
    """Trip one breaker once: its row, its audit entry and its alert."""
    scope = f"{kind}:{name}" if name else str(kind)
    whom = "" if kind == BreakerScope.GLOBAL else f"{kind} {name}: "
    reason = (f"{whom}{drifting} of {total} agents drifted within "
              f"{settings.BREAKER_WINDOW_SECONDS} s (threshold {settings.BREAKER_SHARE_PERCENT}%): "
              f"automatic correction paused"
              + ("" if kind == BreakerScope.GLOBAL else f" for the agents of {kind} {name}"))
    if kind == BreakerScope.GLOBAL:
        if control.breaker_tripped_at is not None:
            return
        control.breaker_tripped_at = ctx.now
        control.breaker_reason = reason
        control.save(update_fields=["breaker_tripped_at", "breaker_reason"])
        target = "control:breaker"
    else:
        _, created = BreakerTrip.objects.get_or_create(
            scope=scope, defaults={"tripped_at": ctx.now, "reason": reason})
        if not created:
            return
        target = f"control:breaker:{scope}"
    audit.record(actor=SYSTEM, action=AuditAction.BREAKER_TRIPPED, target=target,
                 after={"scope": scope, "drifting": drifting, "agents": total}, reason=reason)
    # cluster status, like every agent's health: shown to every person
    alerts.broadcast(AlertKind.BREAKER_TRIPPED, {"message": reason, "severity": "high", "link": "/",
                                         "scope": scope})


def _shadow(ctx: PassContext, finding: Finding, step: Any) -> None:
    correction, created = Correction.objects.get_or_create(
        idempotency_key=step.key,
        defaults={"finding": finding, "agent": ctx.agent, "operation": step.operation.to_dict(),
                  "result": CorrectionResult.SHADOW})
    if created:
        audit.record(actor=SYSTEM, action=AuditAction.CORRECTION_SHADOWED,
                     target=f"correction:{correction.pk}", agent=ctx.agent.name,
                     after=step.operation.to_dict(),
                     reason="shadow mode" if ctx.shadow else "breaker tripped: not applied")


def _pending(ctx: PassContext, finding: Finding, step: Any) -> None:
    correction, created = Correction.objects.get_or_create(
        idempotency_key=step.key,
        defaults={"finding": finding, "agent": ctx.agent, "operation": step.operation.to_dict()})
    if not created and correction.result == CorrectionResult.FAILED:  # tried again, same key
        Correction.objects.filter(pk=correction.pk).update(result=CorrectionResult.PENDING)


def _log(ctx: PassContext, finding: Finding) -> None:
    if finding.status == FindingStatus.LOGGED:
        return
    move_finding(finding, FindingStatus.LOGGED, agent=ctx.agent,
                 reason=f"allowed: enforcement mode log for {finding.area}")


def _waive(ctx: PassContext, finding: Finding, waivers: dict[str, Any]) -> None:
    waiver = next(w for p, w in sorted(waivers.items()) if is_waived((p,), finding.pointer))
    reason = (f"allowed: waiver #{waiver.pk} ({waiver.ticket}) until "
              f"{waiver.expires_at:%Y-%m-%d %H:%M:%S} UTC: {waiver.reason}")
    if finding.status == FindingStatus.LOGGED and finding.reason == reason:
        return
    move_finding(finding, FindingStatus.LOGGED, reason=reason, agent=ctx.agent)


@transaction.atomic
def _applied(ctx: PassContext, finding: Finding, step: Any, outcome: str) -> None:
    now = timezone.now()
    correction = Correction.objects.select_for_update(no_key=True).get(idempotency_key=step.key)
    correction.attempts += 1
    correction.result = CorrectionResult.APPLIED
    correction.applied_at = correction.applied_at or now
    correction.save(update_fields=["attempts", "result", "applied_at"])
    move_finding(finding, FindingStatus.CORRECTING, attempts=step.attempt,
                 occurrence=step.occurrence, agent=ctx.agent)
    audit.record(actor=SYSTEM, action=AuditAction.CORRECTION_APPLIED,
                 target=f"correction:{correction.pk}", agent=ctx.agent.name,
                 after={**step.operation.to_dict(), "idempotency_key": step.key,
                        "outcome": str(outcome)},
                 reason=f"corrects {finding.kind} at {finding.pointer}")


@transaction.atomic
def _refused(ctx: PassContext, finding: Finding, step: Any, reason: str) -> None:
    """The connector refused this change (a role shared with other agents, credentials
    without the privilege): nothing was changed, and a human decides instead of a retry."""
    Correction.objects.filter(idempotency_key=step.key).update(
        result=CorrectionResult.FAILED, error=reason[:2000])
    audit.record(actor=SYSTEM, action=AuditAction.CORRECTION_FAILED,
                 target=f"finding:{finding.pk}", agent=ctx.agent.name,
                 after=step.operation.to_dict(), reason=f"refused: {reason}")
    open_escalation(ctx.agent, finding, reason=f"correction refused: {reason}")


def _failed(ctx: PassContext, decision: Any, error: str) -> None:
    """The steps not applied failed this attempt: counted on their findings, so a platform
    that keeps refusing is escalated after `RECONCILE_MAX_ATTEMPTS` instead of retried
    at every resync for ever."""
    for step in decision.apply:
        if Correction.objects.filter(idempotency_key=step.key,
                                     result=CorrectionResult.PENDING).update(
                result=CorrectionResult.FAILED, error=error[:2000]):
            Finding.objects.filter(agent=ctx.agent, fingerprint=step.drift.fingerprint).update(
                attempts=step.attempt, occurrence=step.occurrence)
    audit.record(actor=SYSTEM, action=AuditAction.CORRECTION_FAILED,
                 target=f"agent:{ctx.agent.name}", agent=ctx.agent.name, reason=error)


def _block(ctx: PassContext, connector: Any, blocked: list[Finding]) -> list[dict[str, Any]]:
    operation = Operation(OperationKind.SUSPEND, "agent")
    key = idempotency_key(ctx.agent.name, ctx.generation, operation, 1)
    outcome = connector.apply(ctx.agent, operation.to_dict(), key)
    with transaction.atomic():
        for finding in blocked:
            move_finding(
                finding, FindingStatus.BLOCKED, agent=ctx.agent,
                reason="enforcement mode block: the agent is suspended until a human clears it")
        suspend_agent(ctx.agent, actor=SYSTEM,
                      reason=f"blocked: {len(blocked)} finding(s) under enforcement mode block")
    return [{**operation.to_dict(), "key": key, "outcome": outcome}]


def _upsert_findings(ctx: PassContext, drifts: list[Drift],
                     regressed: set[str]) -> dict[str, Finding]:
    agent, now = ctx.agent, ctx.now
    existing = {f.fingerprint: f for f in Finding.objects.select_for_update(no_key=True).filter(
        agent=agent, fingerprint__in=[d.fingerprint for d in drifts])}
    out = {}
    for drift in drifts:
        finding = existing.get(drift.fingerprint)
        if finding is None:
            cause = ctx.cause(drift)
            finding = open_finding(
                agent, why=f"found by a {ctx.trigger} pass", after={"cause": cause},
                alert_fields={"cause": cause["key"]},
                fingerprint=drift.fingerprint, kind=drift.kind,
                pointer=drift.pointer, expected=drift.expected, actual=drift.actual,
                severity=drift.severity, area=drift.area, operation=drift.operation.to_dict(),
                observed_at=ctx.observed_at, cause_key=cause["key"], cause=cause,
                generation=ctx.generation, first_seen=now, detected_at=now, last_seen=now)
        elif finding.status in (FindingStatus.CORRECTED, FindingStatus.RESOLVED):
            came_back = drift.fingerprint in regressed
            cause = ctx.cause(drift)
            move_finding(
                finding, FindingStatus.REGRESSED if came_back else FindingStatus.OPEN,
                agent=agent, after={"cause": cause}, alert_fields={"cause": cause["key"]},
                why="the same drift came back within the hold window" if came_back
                else "the drift is back", cause_key=cause["key"], cause=cause,
                occurrence=finding.occurrence + 1,
                attempts=finding.attempts if came_back else 0, detected_at=now,
                last_seen=now, observed_at=ctx.observed_at, generation=ctx.generation)
        else:
            Finding.objects.filter(pk=finding.pk).update(last_seen=now)
        out[drift.fingerprint] = finding
    return out
