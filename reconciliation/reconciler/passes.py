"""One reconcile pass and the periodic resync check.

A pass talks to the platform outside any transaction (a connector call may be slow or may
crash), so its database work is split into short transactions: detection, then one per applied
change, then verification. Whatever a crash interrupts, the next pass re-derives from the
actual state."""

import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from compliance.actions.maintenance import hold_for_window
from compliance.maintenance import window_for
from reconciliation.actions.common import SYSTEM, breaker_held, held_still, open_escalation
from reconciliation.actions.observations import record_observation
from reconciliation.actions.switches import end_expired_shadow
from reconciliation.choices import RunResult, Trigger
from reconciliation.connectors import ConnectorError, CorrectionRefused, connector_for
from reconciliation.controller.work_queue import ensure_still_held
from reconciliation.models import AgentStatus, ControlState, ObservedState, ReconcileRun
from reconciliation.reconciler.correct import (
    _applied,
    _block,
    _check_breaker,
    _failed,
    _log,
    _pending,
    _refused,
    _shadow,
    _waive,
)
from reconciliation.reconciler.diff import diff
from reconciliation.reconciler.observe import _finding_views, _release_accepted, _upsert_findings
from reconciliation.reconciler.pass_context import InSync, PassContext
from reconciliation.reconciler.plan import decide
from reconciliation.reconciler.settle import _settle, _status, refresh_status
from reconciliation.reconciler.verify import _schedule_verify, _suspended, _verify
from reconciliation.resync_query import needing_pass, reconcilable
from registry.actions.waivers import active_waivers, record_lapses
from registry.choices import Lifecycle
from registry.models import Agent


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


def _reconciled(agent_id: int) -> Agent | None:
    """The agent as committed now, when the loop reconciles it (approved, not retired)."""
    agent = (Agent.objects.select_related("active_version", "owner").filter(pk=agent_id)
             .first())
    if agent is None or agent.active_version_id is None or (
            agent.lifecycle == Lifecycle.RETIRED):
        return None
    return agent


def reconcile_agent(agent_id: int, *, trigger: str, now: datetime | None = None
                    ) -> ReconcileRun | None:
    """One level-triggered pass: observe, diff, act per enforcement mode, verify."""
    started, now = time.monotonic(), now or timezone.now()
    agent = _reconciled(agent_id)
    if agent is None:
        return None
    with transaction.atomic():  # before observing: a push agent may not have reported yet
        held = _release_accepted(
            PassContext(agent, trigger, now, started, agent.generation, False))
    # Read again when drift was held: an approval deciding it is in the spec this pass enforces
    # (with the agent read before it, the pass judged the approved drift against the old spec
    # and escalated it again).
    agent = _reconciled(agent_id) if held else agent
    if agent is None:
        return None
    control = ControlState.load()
    status = AgentStatus.objects.get_or_create(agent=agent)[0]
    if status.shadow and status.shadow_until is not None and status.shadow_until <= now:
        with transaction.atomic():  # its time is up: this pass enforces again
            status = AgentStatus.objects.select_for_update().select_related("agent").get(
                pk=status.pk)
            end_expired_shadow(status, now)
    ctx = PassContext(agent, trigger, now, started, agent.generation,
                      shadow=control.shadow or status.shadow)
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
    ctx.witnesses = getattr(connector, "witnesses", None)
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
        ctx.converged_generation = status.converged_generation
        record_lapses(agent, now)
        waivers = {w.pointer: w for w in active_waivers(agent, now)}
        decision = decide(
            agent.enforced_spec, actual, now, agent=agent.name, generation=agent.generation,
            waived=tuple(waivers),
            suspended=held_still(agent), findings=_finding_views(agent),
            hold_applied=ctx.shadow or bool(breaker_held(agent, control)),
            verify_timeout=timedelta(seconds=settings.RECONCILE_VERIFY_TIMEOUT_SECONDS),
            max_attempts=settings.RECONCILE_MAX_ATTEMPTS)
        findings = _upsert_findings(ctx, decision.drifts,
                                    {d.fingerprint for d in decision.regressed})
        if (window := window_for(agent, now)) is not None:  # drift recorded, fixes wait
            hold_for_window(agent, window, decision, findings)
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
        if decision.drifts:  # the agent's health says so before the connector is called
            refresh_status(agent, now=now)

    changes: list[dict[str, Any]] = []
    try:
        for step in decision.apply:
            ensure_still_held()  # a pass that lost its lock stops before its next change
            try:
                outcome = connector.apply(agent, step.operation.to_dict(), step.key)
            except CorrectionRefused as refused:  # not safe to make, or not ours to make
                _refused(ctx, findings[step.drift.fingerprint], step, str(refused))
                continue
            _applied(ctx, findings[step.drift.fingerprint], step, outcome)
            changes.append({**step.operation.to_dict(), "key": step.key, "outcome": outcome})
        blocked = [findings[d.fingerprint] for d in decision.block]
        if blocked:
            ensure_still_held()
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


def converged_check(agent_ids: list[int], now: datetime | None = None) -> list[int]:
    """The batch half of a resync: the agents among `agent_ids` that need a full pass, in one
    set-based query (see `reconciliation.resync_query`); converged agents cost no Python and
    no write."""
    return needing_pass(reconcilable().filter(pk__in=agent_ids), now or timezone.now())
