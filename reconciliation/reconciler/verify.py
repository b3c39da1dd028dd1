"""Verify, the fifth stage: after changes, the agent's platform is asked again (bypassing any
cache) and findings whose drift the fresh observation no longer shows are corrected (or
resolved). Changes not seen yet are left correcting: settle asks the controller for a
verification pass."""

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from reconciliation.actions.findings import move_finding
from reconciliation.actions.observations import record_observation
from reconciliation.choices import CorrectionResult, FindingStatus
from reconciliation.models import Correction, Finding
from reconciliation.reconciler import diff
from reconciliation.reconciler.correct import Corrected
from reconciliation.reconciler.observe import Observed
from reconciliation.reconciler.pass_context import PassContext
from reconciliation.reconciler.plan import Decision
from registry import holds
from registry.choices import Lifecycle
from registry.models import Agent

# The findings a fresh observation can verify (or resolve).
_VERIFIED_FROM = (FindingStatus.OPEN, FindingStatus.CORRECTING, FindingStatus.REGRESSED,
                  FindingStatus.LOGGED)


@dataclass(frozen=True)
class Verified:
    """The state the pass ends on, and the drift it still shows."""

    state: dict[str, Any] | None
    remaining: frozenset[str]
    suspended: bool


def verify(seen: Observed, decision: Decision, corrected: Corrected) -> Verified:
    """Mark what the platform now shows fixed. Without changes the state the pass judged stands
    (its drift is the plan's); after changes the platform is asked again and the fresh state
    compared with `diff` as a pure function (the diff stage is not run again)."""
    ctx, connector = seen.ctx, seen.connector
    if not corrected.changes:
        remaining = frozenset(d.fingerprint for d in decision.drifts)
        if any(f.status in _VERIFIED_FROM and f.fingerprint not in remaining
               for f in seen.findings.values()):
            with transaction.atomic():
                _verify(ctx, remaining)
        return Verified(ctx.actual, remaining, seen.suspended)
    state = connector.observe(ctx.agent)
    if connector.name != "push" and state is not None:
        record_observation(ctx.agent, state, actor=f"connector:{connector.name}",
                           source=connector.name, trigger_reconcile=False)
    with transaction.atomic():
        suspended = _suspended(ctx.agent)
        remaining = frozenset(d.fingerprint for d in diff.diff(
            ctx.agent.enforced_spec, state or {}, ctx.now, suspended=suspended))
        _verify(ctx, remaining)
    return Verified(state, remaining, suspended)


def _suspended(agent: Agent) -> bool:
    return (Agent.objects.filter(pk=agent.pk, lifecycle=Lifecycle.SUSPENDED).exists()
            or holds.stopped(agent))


def _verify(ctx: PassContext, remaining: set[str]) -> None:
    """Findings whose drift is gone from a fresh observation are verified (or resolved)."""
    now = max(ctx.now, timezone.now())  # verification time, for time-to-verify figures
    config_findings = Finding.objects.select_for_update(no_key=True).filter(
        agent=ctx.agent, behaviour=False, status__in=_VERIFIED_FROM)
    for finding in config_findings:
        if finding.fingerprint in remaining:
            continue
        corrected = finding.status in (FindingStatus.CORRECTING, FindingStatus.REGRESSED)
        Correction.objects.filter(finding=finding, result=CorrectionResult.APPLIED).update(
            result=CorrectionResult.VERIFIED, verified_at=now)
        if corrected:
            seconds = (now - finding.detected_at).total_seconds()
            move_finding(finding, FindingStatus.CORRECTED, at=now, revert_ordered=False,
                         agent=ctx.agent, why="verified by a fresh observation",
                         alert_fields={"seconds_to_verify": round(seconds, 3)})
        else:
            move_finding(finding, FindingStatus.RESOLVED, corrected_at=now, hold_until=None,
                         revert_ordered=False, agent=ctx.agent, why="no longer observed")
