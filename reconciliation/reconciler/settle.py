"""Settle: an agent's conditions, health and in-sync record recomputed from its findings and
escalations, after a pass or right after a human changed them."""

from datetime import datetime

from reconciliation.actions.common import state_hash
from reconciliation.choices import OPEN_STATUSES, EscalationStatus, FindingStatus, Health
from reconciliation.conditions import compute_conditions
from reconciliation.desired_horizon import next_change_at
from reconciliation.models import AgentStatus, Escalation, Finding, Silence
from reconciliation.recertified import merge, recertified_condition
from reconciliation.reconciler.pass_context import InSync, PassContext
from reconciliation.silence import overlay as silence_overlay
from registry.choices import Lifecycle
from registry.models import Agent


def _status(agent: Agent) -> AgentStatus:
    return AgentStatus.objects.select_for_update().get_or_create(agent=agent)[0]


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
    retired = row["lifecycle"] == Lifecycle.RETIRED
    previous = status.conditions
    status.conditions = silence_overlay(merge(compute_conditions(
        previous, generation=generation, now=now, suspended=suspended,
        failed=failed, **counts), recertified_condition(
        previous, due=row["review_due_at"], overdue=row["overdue_at"] is not None,
        generation=generation, now=now)),
        Silence.objects.filter(agent=agent, ended_at__isnull=True).first())
    status.open_findings = counts["drifted"]
    status.health = (
        Health.RETIRED if retired else Health.SUSPENDED if suspended else Health.FAILED if failed
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
