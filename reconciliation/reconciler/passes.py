"""One reconcile pass: its stages, each called once and in order, each handed what the one
before it found: observe (the agent's platform, through its connector), diff (pure), plan
(pure), correct, verify, settle. The pass knows nothing of the queue that runs it: what it
needs from its controller is passed in, and when the next pass should run is returned.

A pass talks to the platform outside any transaction (a connector call may be slow or may
crash), so its database work is split into short transactions: what it read, the drift found
(committed, and so announced, first), what is done about it without the platform, one per
applied change, verification, settlement. Whatever a crash interrupts, the next pass
re-derives from the actual state."""

from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from reconciliation.actions.common import breaker_held
from reconciliation.models import ReconcileRun
from reconciliation.reconciler import correct, diff, observe, plan, settle, verify
from reconciliation.reconciler.settle import Result
from reconciliation.resync_query import needing_pass, reconcilable

__all__ = ["Result", "converged_check", "reconcile", "reconcile_agent"]


def reconcile(agent_id: int, *, trigger: str, now: datetime | None = None,
              still_held: Callable[[], None] | None = None) -> Result:
    """One level-triggered pass over an agent. Raises the platform's `ConnectorError` once the
    pass is recorded as failed, for its controller to back off."""
    now = now or timezone.now()
    seen = observe.observe(agent_id, trigger=trigger, now=now)
    if seen is None:
        return Result(None)
    if seen.error is not None or seen.ctx.actual is None:
        result = settle.settle(seen)
        if seen.error is not None:
            raise seen.error
        return result
    agent = seen.ctx.agent
    drifts = diff.diff(agent.enforced_spec, seen.ctx.actual, now, suspended=seen.suspended)
    decision = plan.decide(
        agent.enforced_spec, seen.ctx.actual, now, agent=agent.name,
        generation=agent.generation, waived=tuple(seen.waivers), suspended=seen.suspended,
        findings=seen.findings, hold_applied=_held(seen, drifts), drifts=drifts,
        verify_timeout=timedelta(seconds=settings.RECONCILE_VERIFY_TIMEOUT_SECONDS),
        max_attempts=settings.RECONCILE_MAX_ATTEMPTS)
    corrected = correct.correct(seen, decision, still_held=still_held)
    if corrected.error is not None:
        settle.settle(seen, decision, corrected)
        raise corrected.error
    verified = verify.verify(seen, decision, corrected)
    return settle.settle(seen, decision, corrected, verified)


def _held(seen: observe.Observed, drifts: list) -> bool:
    """Shadow mode or a tripped breaker: the plan records its changes and applies none (only
    asked when there is drift to plan for)."""
    return seen.ctx.shadow or bool(drifts and breaker_held(seen.ctx.agent, seen.control))


def reconcile_agent(agent_id: int, *, trigger: str, now: datetime | None = None
                    ) -> ReconcileRun | None:
    """One pass, for callers that want its run only (its requeue is the controller's)."""
    return reconcile(agent_id, trigger=trigger, now=now).run


def converged_check(agent_ids: list[int], now: datetime | None = None) -> list[int]:
    """The batch half of a resync: the agents among `agent_ids` that need a full pass, in one
    set-based query (see `reconciliation.resync_query`); converged agents cost no Python and
    no write."""
    return needing_pass(reconcilable().filter(pk__in=agent_ids), now or timezone.now())
