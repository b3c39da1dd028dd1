"""One reconcile pass and the periodic resync check.

A pass talks to the platform outside any transaction (a connector call may be slow or may
crash), so its database work is split into short transactions: detection, then one per applied
change, then verification. Whatever a crash interrupts, the next pass re-derives from the
actual state."""

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, QuerySet
from django.utils import timezone

import audit
from audit.choices import AuditAction
from reconciliation import alerts
from reconciliation.actions.common import (
    SYSTEM,
    alert,
    breaker_held,
    open_escalation,
    state_hash,
    suspend_agent,
)
from reconciliation.actions.observations import record_observation
from reconciliation.attribution import cause_of, pending_proposals
from reconciliation.choices import (
    OPEN_STATUSES,
    TEAM_LABEL,
    BreakerScope,
    CorrectionResult,
    EscalationStatus,
    FindingStatus,
    Health,
    RunResult,
    Trigger,
)
from reconciliation.conditions import compute_conditions
from reconciliation.connectors import ConnectorError, connector_for
from reconciliation.desired_horizon import next_change_at
from reconciliation.diff import Drift, Operation, OperationKind, diff
from reconciliation.models import (
    AgentStatus,
    BreakerTrip,
    ControlState,
    Correction,
    Escalation,
    Finding,
    ObservedState,
    ReconcileRun,
    Silence,
)
from reconciliation.plan import FindingView, decide, idempotency_key
from reconciliation.recertified import merge, recertified_condition
from reconciliation.resync_query import needing_pass, reconcilable
from reconciliation.silence import overlay as silence_overlay
from registry.actions.waivers import active_waivers, record_lapses
from registry.choices import Lifecycle, VersionState
from registry.models import Agent
from registry.waivers import is_waived


@dataclass(frozen=True)
class InSync:
    """A pass found no diff between the desired state (suspended or not) and `observed`."""

    observed: dict[str, Any]
    suspended: bool


@dataclass
class PassContext:
    agent: Agent
    trigger: str
    now: datetime
    started: float
    generation: int
    shadow: bool
    observed_at: datetime | None = None  # when the state this pass judges was first seen
    actual: dict[str, Any] | None = None  # the state this pass judges
    change: dict[str, Any] | None = None  # the change that made it, when the reporter says
    proposals: list[tuple[int, dict[str, Any]]] | None = None  # loaded on the first new drift

    def cause(self, drift: Drift) -> dict[str, Any]:
        """What caused a drift found now (reconciliation/attribution.py)."""
        if self.proposals is None and not self.change:
            self.proposals = pending_proposals(self.agent)
        return cause_of(drift, change=self.change, observed=self.actual or {},
                        proposals=self.proposals or [], now=self.now)


def _finding_views(agent: Agent) -> dict[str, FindingView]:
    applied = {}
    for fingerprint, applied_at in (Correction.objects.filter(
            agent=agent, applied_at__isnull=False).values_list("finding__fingerprint",
                                                               "applied_at")):
        applied[fingerprint] = max(applied_at, applied.get(fingerprint, applied_at))
    return {
        f.fingerprint: FindingView(f.fingerprint, f.status, f.occurrence, f.attempts,
                                   applied.get(f.fingerprint), f.hold_until, f.revert_ordered)
        for f in Finding.objects.filter(agent=agent, behaviour=False)
    }


def _release_accepted(ctx: PassContext) -> None:
    """Drift an approver accepted into a proposal is held while the proposal is pending; once
    it is refused or withdrawn the drift is back in the loop (approved: the drift is gone).
    Behaviour cannot be observed again, so a behaviour finding follows its own proposal: once
    approved the raised limit covers it (resolved); otherwise it is escalated again."""
    held = list(Finding.objects.filter(agent=ctx.agent, status=FindingStatus.ACCEPTED)
                .select_related("proposal"))
    decided = [f for f in held if f.behaviour and f.proposal_id
               and f.proposal.state != VersionState.PENDING]
    for finding in decided:
        _release_behaviour(ctx, finding)
    if decided:
        refresh_status(ctx.agent, now=ctx.now)
    held = [f for f in held if not (f.behaviour and f.proposal_id)]
    if not held or ctx.agent.versions.filter(state=VersionState.PENDING).exists():
        return
    for finding in held:
        finding.transition(FindingStatus.OPEN,
                           reason="the proposal that accepted it was not approved")
        audit.record(actor=SYSTEM, action=AuditAction.FINDING_REOPENED,
                     target=f"finding:{finding.pk}", agent=ctx.agent.name,
                     before={"status": FindingStatus.ACCEPTED},
                     after={"status": FindingStatus.OPEN},
                     reason="the proposal that accepted it was not approved")


def _release_behaviour(ctx: PassContext, finding: Finding) -> None:
    proposal = finding.proposal
    if proposal.state == VersionState.APPROVED:
        reason = (f"allowed from generation {proposal.generation} on (proposal {proposal.pk} "
                  "was approved)")
        finding.transition(FindingStatus.RESOLVED, reason=reason)
        audit.record(actor=SYSTEM, action=AuditAction.FINDING_RESOLVED,
                     target=f"finding:{finding.pk}", agent=ctx.agent.name,
                     before={"status": FindingStatus.ACCEPTED},
                     after={"status": FindingStatus.RESOLVED}, reason=reason)
        return
    reason = f"proposal {proposal.pk} to allow it was {proposal.state}: a human decides again"
    audit.record(actor=SYSTEM, action=AuditAction.FINDING_REOPENED,
                 target=f"finding:{finding.pk}", agent=ctx.agent.name,
                 before={"status": FindingStatus.ACCEPTED},
                 after={"status": FindingStatus.ESCALATED}, reason=reason)
    open_escalation(ctx.agent, finding, reason=reason)


def _status(agent: Agent) -> AgentStatus:
    return AgentStatus.objects.select_for_update().get_or_create(agent=agent)[0]


def _upsert_findings(ctx: PassContext, drifts: list[Drift],
                     regressed: set[str]) -> dict[str, Finding]:
    agent, now = ctx.agent, ctx.now
    existing = {f.fingerprint: f for f in Finding.objects.select_for_update().filter(
        agent=agent, fingerprint__in=[d.fingerprint for d in drifts])}
    out = {}
    for drift in drifts:
        finding = existing.get(drift.fingerprint)
        if finding is None:
            cause = ctx.cause(drift)
            finding = Finding.objects.create(
                agent=agent, fingerprint=drift.fingerprint, kind=drift.kind,
                pointer=drift.pointer, expected=drift.expected, actual=drift.actual,
                severity=drift.severity, area=drift.area, operation=drift.operation.to_dict(),
                observed_at=ctx.observed_at, cause_key=cause["key"], cause=cause,
                generation=ctx.generation, first_seen=now, detected_at=now, last_seen=now)
            audit.record(actor=SYSTEM, action=AuditAction.FINDING_OPENED,
                         target=f"finding:{finding.pk}", agent=agent.name,
                         after={**finding.to_dict(), "cause": cause},
                         reason=f"found by a {ctx.trigger} pass")
            alert("drift.detected", agent, finding, cause=cause["key"])
        elif finding.status in (FindingStatus.CORRECTED, FindingStatus.RESOLVED):
            came_back = drift.fingerprint in regressed
            was = finding.status
            cause = ctx.cause(drift)
            finding.cause_key, finding.cause = cause["key"], cause
            finding.transition(
                FindingStatus.REGRESSED if came_back else FindingStatus.OPEN, save=False,
                occurrence=finding.occurrence + 1,
                attempts=finding.attempts if came_back else 0, detected_at=now,
                last_seen=now, observed_at=ctx.observed_at, generation=ctx.generation)
            finding.save()
            audit.record(
                actor=SYSTEM, target=f"finding:{finding.pk}", agent=agent.name,
                action=AuditAction.FINDING_REGRESSED if came_back else AuditAction.FINDING_OPENED,
                before={"status": was}, after={**finding.to_dict(), "cause": cause},
                reason="the same drift came back within the hold window" if came_back
                else "the drift is back")
            alert("drift.regressed" if came_back else "drift.detected", agent, finding,
                  cause=cause["key"])
        else:
            Finding.objects.filter(pk=finding.pk).update(last_seen=now)
        out[drift.fingerprint] = finding
    return out


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
    since = ctx.now - timedelta(seconds=settings.BREAKER_WINDOW_SECONDS)
    members = Agent.objects.filter(lifecycle=Lifecycle.ACTIVE, active_version__isnull=False)
    drifted = members.filter(pk__in=Finding.objects.filter(
        detected_at__gte=since, behaviour=False).values("agent_id"))
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
        drifting = _drifting_counted(drifted.filter(**where), capped=capped)
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
    alerts.broadcast("breaker.tripped", {"message": reason, "severity": "high", "link": "/",
                                         "scope": scope})


def _run(ctx: PassContext, result: str, *, drift_found: int = 0,
         changes: list[dict[str, Any]] | None = None, error: str = "",
         error_detail: str = "") -> ReconcileRun:
    duration = int((time.monotonic() - ctx.started) * 1000)
    run = ReconcileRun.objects.create(
        agent=ctx.agent, trigger=ctx.trigger, generation=ctx.generation, started_at=ctx.now,
        duration_ms=duration, drift_found=drift_found, changes=changes or [], result=result,
        shadow=ctx.shadow, error=error, error_detail=error_detail)
    if changes or error:
        audit.record(actor=SYSTEM, action=AuditAction.RECONCILE_RUN, target=f"run:{run.pk}",
                     agent=ctx.agent.name, after={"result": result, "changes": changes or [],
                                                  "drift_found": drift_found,
                                                  "generation": ctx.generation},
                     reason=error or f"{ctx.trigger} pass")
    return run


def _apply_counts(agent: Agent, status: AgentStatus, *, generation: int, now: datetime,
                  failed: str = "") -> dict[str, int]:
    """Conditions, health and open findings of `status` from the agent's findings and
    escalations (not saved)."""
    findings = Finding.objects.filter(agent=agent)
    counts = {
        "drifted": findings.filter(status__in=OPEN_STATUSES).count(),
        "correcting": findings.filter(status=FindingStatus.CORRECTING).count(),
        "escalated": Escalation.objects.filter(agent=agent,
                                               status=EscalationStatus.OPEN).count(),
    }
    row = Agent.objects.filter(pk=agent.pk).values(
        "lifecycle", "review_due_at", "overdue_at").get()
    suspended = row["lifecycle"] == Lifecycle.SUSPENDED
    previous = status.conditions
    status.conditions = silence_overlay(merge(compute_conditions(
        previous, generation=generation, now=now, suspended=suspended,
        failed=failed, **counts), recertified_condition(
        previous, due=row["review_due_at"], overdue=row["overdue_at"] is not None,
        generation=generation, now=now)),
        Silence.objects.filter(agent=agent, ended_at__isnull=True).first())
    status.open_findings = counts["drifted"]
    status.health = (
        Health.SUSPENDED if suspended else Health.FAILED if failed
        else Health.ESCALATED if counts["escalated"] else Health.CORRECTING
        if counts["correcting"] else Health.DRIFTED if counts["drifted"] else Health.IN_POLICY)
    return counts


def _settle(ctx: PassContext, *, failed: str = "", in_sync: InSync | None = None
            ) -> dict[str, int]:
    """Recompute the agent's conditions from its findings and escalations; remember what was
    found in sync (or forget it), for the resync's set-based check."""
    status = _status(ctx.agent)
    counts = _apply_counts(ctx.agent, status, generation=ctx.generation, now=ctx.now,
                           failed=failed)
    converged = not failed and not any(counts.values())
    if converged:  # at this generation, even if it never looked unconverged in between
        status.converged_generation = ctx.generation
    status.converged = converged
    in_sync = in_sync if converged else None
    status.in_sync_version = ctx.agent.active_version_id if in_sync else None
    status.in_sync_suspended = in_sync.suspended if in_sync else False
    status.in_sync_observed_sha256 = state_hash(in_sync.observed) if in_sync else ""
    status.in_sync_until = next_change_at(
        ctx.agent.active_version.spec, in_sync.observed, ctx.now) if in_sync else None
    status.observed_generation = ctx.generation
    status.last_reconciled_at = ctx.now
    status.save()
    return counts


def refresh_status(agent: Agent, *, now: datetime) -> None:
    """Conditions and health again, right after a human changed findings or escalations (in
    their transaction), so the agent's page is right before the next pass. Convergence is
    left to that pass: only it has looked at the actual state."""
    status = _status(agent)
    ready = status.condition("Ready")
    failed = ready["message"] if ready and ready["reason"] == "ReconcileFailed" else ""
    _apply_counts(agent, status, generation=status.observed_generation or agent.generation,
                  now=now, failed=failed)
    status.save(update_fields=["conditions", "open_findings", "health"])


def reconcile_agent(agent_id: int, *, trigger: str, now: datetime | None = None
                    ) -> ReconcileRun | None:
    """One level-triggered pass: observe, diff, act per enforcement mode, verify."""
    agent = (Agent.objects.select_related("active_version", "owner").filter(pk=agent_id)
             .first())
    if agent is None or agent.active_version_id is None or (
            agent.lifecycle == Lifecycle.RETIRED):
        return None
    now = now or timezone.now()
    control = ControlState.load()
    status = AgentStatus.objects.get_or_create(agent=agent)[0]
    ctx = PassContext(agent, trigger, now, time.monotonic(), agent.generation,
                      shadow=control.shadow or status.shadow)
    with transaction.atomic():  # before observing: a push agent may not have reported yet
        _release_accepted(ctx)
    connector = connector_for(agent)
    try:
        actual = connector.observe(agent)
    except ConnectorError as error:
        with transaction.atomic():
            _settle(ctx, failed=str(error))
            _run(ctx, RunResult.FAILED, error=str(error), error_detail=error.detail)
        raise
    if actual is None:
        with transaction.atomic():
            return _run(ctx, RunResult.SKIPPED, error="no observed state yet")
    ctx.actual = actual
    if connector.name != "push":
        ctx.change = getattr(connector, "last_change", None)
        row, _ = record_observation(agent, actual, actor=f"connector:{connector.name}",
                                    source=connector.name, trigger_reconcile=False,
                                    change=ctx.change)
        ctx.observed_at = min(row.observed_at, ctx.now)  # read by this pass: seen now
    else:
        ctx.observed_at, ctx.change = (
            ObservedState.objects.filter(agent=agent).order_by("-observed_at")
            .values_list("observed_at", "change").first() or (None, None))

    with transaction.atomic():  # detection
        control = ControlState.objects.select_for_update().get(pk=control.pk)
        status = _status(agent)
        was_converged = status.converged and status.converged_generation == agent.generation
        record_lapses(agent, now)
        waivers = {w.pointer: w for w in active_waivers(agent, now)}
        decision = decide(
            agent.enforced_spec, actual, now, agent=agent.name, generation=agent.generation,
            waived=tuple(waivers),
            suspended=agent.lifecycle == Lifecycle.SUSPENDED, findings=_finding_views(agent),
            hold_applied=ctx.shadow or bool(breaker_held(agent, control)),
            verify_timeout=timedelta(seconds=settings.RECONCILE_VERIFY_TIMEOUT_SECONDS),
            max_attempts=settings.RECONCILE_MAX_ATTEMPTS)
        findings = _upsert_findings(ctx, decision.drifts,
                                    {d.fingerprint for d in decision.regressed})
        if decision.drifts and was_converged and trigger != Trigger.APPROVED:
            ControlState.objects.filter(pk=control.pk).update(
                post_convergence_drift=control.post_convergence_drift + 1)
        if decision.drifts:
            _check_breaker(ctx, control)
        for step in decision.shadow:
            _shadow(ctx, findings[step.drift.fingerprint], step)
        for step in decision.apply:
            _pending(ctx, findings[step.drift.fingerprint], step)
        for drift in decision.log:
            _log(ctx, findings[drift.fingerprint])
        for drift in decision.waived:
            _waive(ctx, findings[drift.fingerprint], waivers)
        for drift, reason in decision.escalate:
            open_escalation(agent, findings[drift.fingerprint], reason=reason)

    changes: list[dict[str, Any]] = []
    try:
        for step in decision.apply:
            outcome = connector.apply(agent, step.operation.to_dict(), step.key)
            _applied(ctx, findings[step.drift.fingerprint], step, outcome)
            changes.append({**step.operation.to_dict(), "key": step.key, "outcome": outcome})
        blocked = [findings[d.fingerprint] for d in decision.block]
        if blocked:
            changes.extend(_block(ctx, connector, blocked))
    except ConnectorError as error:
        with transaction.atomic():
            _failed(ctx, decision, str(error))
            _settle(ctx, failed=str(error))
            _run(ctx, RunResult.FAILED, drift_found=len(decision.drifts), changes=changes,
                 error=str(error), error_detail=error.detail)
        raise

    verified_state = connector.observe(agent) if changes else actual
    if changes and connector.name != "push" and verified_state is not None:
        record_observation(agent, verified_state, actor=f"connector:{connector.name}",
                           source=connector.name, trigger_reconcile=False)
    with transaction.atomic():  # verification
        suspended = _suspended(agent)
        remaining = {d.fingerprint for d in diff(agent.enforced_spec, verified_state or {},
                                                 now, suspended=suspended)}
        _verify(ctx, remaining)
        counts = _settle(ctx, in_sync=None if remaining or verified_state is None
                         else InSync(verified_state, suspended))
        if counts["correcting"]:
            _schedule_verify(agent)
        if not decision.drifts:
            result = RunResult.CONVERGED
        elif counts["correcting"]:
            result = RunResult.CORRECTING
        elif changes and not counts["drifted"]:
            result = RunResult.CORRECTED
        else:
            result = RunResult.DRIFTED
        return _run(ctx, result, drift_found=len(decision.drifts), changes=changes)


def _suspended(agent: Agent) -> bool:
    return Agent.objects.filter(pk=agent.pk, lifecycle=Lifecycle.SUSPENDED).exists()


def _schedule_verify(agent: Agent) -> None:
    from reconciliation.jobs import schedule_verify

    transaction.on_commit(lambda: schedule_verify(agent.pk), robust=True)


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
    was = finding.status
    finding.transition(FindingStatus.LOGGED,
                       reason=f"allowed: enforcement mode log for {finding.area}")
    audit.record(actor=SYSTEM, action=AuditAction.FINDING_LOGGED,
                 target=f"finding:{finding.pk}", agent=ctx.agent.name, before={"status": was},
                 after=finding.to_dict(), reason=finding.reason)


def _waive(ctx: PassContext, finding: Finding, waivers: dict[str, Any]) -> None:
    waiver = next(w for p, w in sorted(waivers.items()) if is_waived((p,), finding.pointer))
    reason = (f"allowed: waiver #{waiver.pk} ({waiver.ticket}) until "
              f"{waiver.expires_at:%Y-%m-%d %H:%M:%S} UTC: {waiver.reason}")
    if finding.status == FindingStatus.LOGGED and finding.reason == reason:
        return
    was = finding.status
    finding.transition(FindingStatus.LOGGED, reason=reason)
    audit.record(actor=SYSTEM, action=AuditAction.FINDING_LOGGED,
                 target=f"finding:{finding.pk}", agent=ctx.agent.name, before={"status": was},
                 after=finding.to_dict(), reason=reason)


@transaction.atomic
def _applied(ctx: PassContext, finding: Finding, step: Any, outcome: str) -> None:
    now = timezone.now()
    correction = Correction.objects.select_for_update().get(idempotency_key=step.key)
    correction.attempts += 1
    correction.result = CorrectionResult.APPLIED
    correction.applied_at = correction.applied_at or now
    correction.save(update_fields=["attempts", "result", "applied_at"])
    finding.transition(FindingStatus.CORRECTING, attempts=step.attempt,
                       occurrence=step.occurrence)
    audit.record(actor=SYSTEM, action=AuditAction.CORRECTION_APPLIED,
                 target=f"correction:{correction.pk}", agent=ctx.agent.name,
                 after={**step.operation.to_dict(), "idempotency_key": step.key,
                        "outcome": str(outcome)},
                 reason=f"corrects {finding.kind} at {finding.pointer}")


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
            finding.transition(
                FindingStatus.BLOCKED,
                reason="enforcement mode block: the agent is suspended until a human clears it")
        suspend_agent(ctx.agent, actor=SYSTEM,
                      reason=f"blocked: {len(blocked)} finding(s) under enforcement mode block")
    return [{**operation.to_dict(), "key": key, "outcome": outcome}]


def _verify(ctx: PassContext, remaining: set[str]) -> None:
    """Findings whose drift is gone from a fresh observation are verified (or resolved)."""
    now = max(ctx.now, timezone.now())  # verification time, for time-to-verify figures
    config_findings = Finding.objects.select_for_update().filter(
        agent=ctx.agent, behaviour=False, status__in=[
            FindingStatus.OPEN, FindingStatus.CORRECTING, FindingStatus.REGRESSED,
            FindingStatus.LOGGED])
    for finding in config_findings:
        if finding.fingerprint in remaining:
            continue
        corrected = finding.status in (FindingStatus.CORRECTING, FindingStatus.REGRESSED)
        was = finding.status
        if corrected:
            finding.transition(FindingStatus.CORRECTED, at=now, revert_ordered=False)
        else:
            finding.transition(FindingStatus.RESOLVED, corrected_at=now, hold_until=None,
                               revert_ordered=False)
        Correction.objects.filter(finding=finding, result=CorrectionResult.APPLIED).update(
            result=CorrectionResult.VERIFIED, verified_at=now)
        audit.record(
            actor=SYSTEM, agent=ctx.agent.name, target=f"finding:{finding.pk}",
            action=AuditAction.FINDING_CORRECTED if corrected else AuditAction.FINDING_RESOLVED,
            before={"status": was}, after=finding.to_dict(),
            reason="verified by a fresh observation" if corrected else "no longer observed")
        if corrected:
            seconds = (now - finding.detected_at).total_seconds()
            alert("drift.corrected", ctx.agent, finding, seconds_to_verify=round(seconds, 3))




def converged_check(agent_ids: list[int], now: datetime | None = None) -> list[int]:
    """The batch half of a resync: the agents among `agent_ids` that need a full pass, in one
    set-based query (see `reconciliation.resync_query`); converged agents cost no Python and
    no write."""
    return needing_pass(reconcilable().filter(pk__in=agent_ids), now or timezone.now())
