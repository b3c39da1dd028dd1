"""Settle, the last stage: the agent's conditions, health and in-sync record recomputed from its
findings and escalations, the pass's run row, and when the controller should run the next pass
(`next_pass`: a verification, a grant's end, a waiver's lapse, a shadow's end, the end of a
maintenance window that held corrections). Nothing else schedules a timed pass: a change asks
for a pass now, and that pass says when the next one is due."""

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.choices import AuditAction
from reconciliation.actions.common import state_hash
from reconciliation.agent_status import apply_counts, locked_status, refresh_status
from reconciliation.choices import RunResult, Trigger
from reconciliation.desired_horizon import next_change_at
from reconciliation.models import ReconcileRun
from reconciliation.reconciler.correct import Corrected
from reconciliation.reconciler.observe import Observed
from reconciliation.reconciler.pass_context import InSync, PassContext
from reconciliation.reconciler.plan import Decision
from reconciliation.reconciler.verify import Verified


@dataclass(frozen=True)
class Result:
    """What one pass did, and when the controller should run the next one on its own (None:
    only when a trigger asks), as controller-runtime's `reconcile.Result`."""

    run: ReconcileRun | None
    requeue_after: timedelta | None = None
    requeue_trigger: str = ""  # why the requeued pass runs (Trigger)


def settle(seen: Observed, decision: Decision | None = None,
           corrected: Corrected | None = None, verified: Verified | None = None) -> Result:
    """Close the pass: status, its run row and its requeue. `seen.error` or `corrected.error`
    is a failed pass; no observed state is a skipped one."""
    ctx = seen.ctx
    with transaction.atomic():
        if seen.error is not None:
            _settle(ctx, failed=str(seen.error))
            return Result(_run(ctx, RunResult.FAILED, error=str(seen.error),
                               error_detail=seen.error.detail))
        if ctx.actual is None:
            if seen.released_behaviour:
                refresh_status(ctx.agent, now=ctx.now)
            return Result(_run(ctx, RunResult.SKIPPED, error="no observed state yet"))
        assert decision is not None and corrected is not None
        drift_found = len(decision.drifts)
        if corrected.error is not None:
            _settle(ctx, failed=str(corrected.error))
            return Result(_run(ctx, RunResult.FAILED, drift_found=drift_found,
                               changes=corrected.changes, error=str(corrected.error),
                               error_detail=corrected.error.detail))
        assert verified is not None
        due = _due(seen, verified.state, corrected, correcting=False)
        counts = _settle(ctx, in_sync=None if verified.remaining or verified.state is None
                         else InSync(verified.state, verified.suspended),
                         due=due[0] if due else None)
        if not decision.drifts:
            result = RunResult.CONVERGED
        elif counts["correcting"]:
            result = RunResult.CORRECTING
        elif corrected.changes and not counts["drifted"]:
            result = RunResult.CORRECTED
        else:
            result = RunResult.DRIFTED
        run = _run(ctx, result, drift_found=drift_found, changes=corrected.changes)
    due = _due(seen, verified.state, corrected, correcting=bool(counts["correcting"]))
    return Result(run, due[0] - ctx.now, due[1]) if due else Result(run)


def next_pass(now: datetime, *, spec: Mapping[str, Any], observed: Mapping[str, Any] | None,
              waivers_end: Iterable[datetime] = (), shadow_until: datetime | None = None,
              held_until: datetime | None = None, verify_in: timedelta | None = None
              ) -> tuple[datetime, str] | None:
    """The soonest moment after `now` at which a pass would decide differently with no
    trigger, and why (a `Trigger`), or None (only a trigger changes anything). Pure.

    - a grant's end, in the desired `spec` (it drops out of the desired state) or in the
      `observed` state (access that outlives it becomes drift): `grant_expired`;
    - the end of a waiver in force (its drift is enforced again): `waiver_lapsed`;
    - the end of the agent's shadow mode (corrections are applied again): `shadow_expired`;
    - `held_until`, the end of the maintenance window that held this pass's corrections
      (they run then): `window_ended`;
    - `verify_in`, a correction applied and not seen yet (a verification pass): `verify`."""
    due: list[tuple[datetime, str]] = [(when, Trigger.WAIVER_LAPSED) for when in waivers_end]
    grant_end = next_change_at(spec, observed, now)
    if grant_end is not None:
        due.append((grant_end, Trigger.GRANT_EXPIRED))
    if shadow_until is not None:
        due.append((shadow_until, Trigger.SHADOW_EXPIRED))
    if held_until is not None:
        due.append((held_until, Trigger.WINDOW_ENDED))
    due = [(when, why) for when, why in due if when > now]
    if verify_in is not None:
        due.append((now + verify_in, Trigger.VERIFY))
    if not due:
        return None
    when, why = min(due)
    return when, str(why)


def _due(seen: Observed, state: dict[str, Any] | None, corrected: Corrected, *,
         correcting: bool) -> tuple[datetime, str] | None:
    """`next_pass` for this pass: its waivers, its shadow, the state it ends on (`state`)
    against the spec it enforced, and what its corrections wait for."""
    return next_pass(
        seen.ctx.now, spec=seen.ctx.agent.enforced_spec, observed=state,
        waivers_end=[w.expires_at for w in seen.waivers.values()],
        shadow_until=seen.shadow_until, held_until=corrected.held_until,
        verify_in=timedelta(seconds=settings.RECONCILE_VERIFY_DELAY_SECONDS) if correcting
        else None)


def _settle(ctx: PassContext, *, failed: str = "", in_sync: InSync | None = None,
            due: datetime | None = None) -> dict[str, int]:
    """Recompute the agent's conditions from its findings and escalations; remember what was
    found in sync (or forget it), and until when (`due`, the pass's `next_pass`: a grant's end,
    a waiver's lapse, a shadow's end), for the resync's and a heartbeat's set-based check: a
    timed pass that was lost (Redis down at the requeue, the job deleted) is then run by the
    next resync after that moment."""
    status = locked_status(ctx.agent)
    counts = apply_counts(ctx.agent, status, generation=ctx.generation, now=ctx.now,
                          failed=failed)
    converged = not failed and not any(counts.values())
    if converged:  # at this generation, even if it never looked unconverged in between
        status.converged_generation = ctx.generation
    status.converged = converged
    in_sync = in_sync if converged else None
    status.in_sync_version = ctx.agent.active_version_id if in_sync else None
    status.in_sync_suspended = in_sync.suspended if in_sync else False
    status.in_sync_observed_sha256 = state_hash(in_sync.observed) if in_sync else ""
    status.in_sync_until = due if in_sync else None
    status.observed_generation = ctx.generation
    status.last_reconciled_at = ctx.now
    status.save()
    return counts


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
