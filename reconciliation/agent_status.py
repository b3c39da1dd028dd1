"""An agent's conditions and health, recomputed from its findings and escalations: by the
pass's settle stage, by a stage that must show drift before a slow platform call, and by the
actions of a human that changed findings or escalations."""

from datetime import datetime

from django.db.models import Count, Q

from reconciliation.choices import OPEN_STATUSES, EscalationStatus, FindingStatus, Health
from reconciliation.conditions import compute_conditions, with_silence
from reconciliation.models import AgentStatus, Escalation, Finding, Silence
from reconciliation.recertified import merge, recertified_condition
from registry.choices import Lifecycle
from registry.models import Agent


def locked_status(agent: Agent) -> AgentStatus:
    """The agent's status row, locked for this transaction (created on first use)."""
    return AgentStatus.objects.select_for_update(no_key=True).get_or_create(agent=agent)[0]


def status_if_free(agent: Agent) -> AgentStatus | None:
    """The agent's status row locked for this transaction, or None when another transaction
    holds it (a settling pass, which writes it from what is then committed). For an action
    holding the agent's row: the pass holds the status row and then wants the agent's, so
    waiting for it would deadlock."""
    status = (AgentStatus.objects.select_for_update(no_key=True, skip_locked=True)
              .filter(agent=agent).first())
    if status is None and AgentStatus.objects.filter(agent=agent).exists():
        return None
    return status or locked_status(agent)


def apply_counts(agent: Agent, status: AgentStatus, *, generation: int, now: datetime,
                 failed: str = "") -> dict[str, int]:
    """Conditions, health and open findings of `status` from the agent's findings and
    escalations (not saved)."""
    counts = Finding.objects.filter(agent=agent).aggregate(
        drifted=Count("pk", filter=Q(status__in=OPEN_STATUSES)),
        correcting=Count("pk", filter=Q(status=FindingStatus.CORRECTING)))
    counts["escalated"] = Escalation.objects.filter(agent=agent,
                                                    status=EscalationStatus.OPEN).count()
    row = Agent.objects.filter(pk=agent.pk).values(
        "lifecycle", "review_due_at", "overdue_at").get()
    suspended = row["lifecycle"] == Lifecycle.SUSPENDED
    retired = row["lifecycle"] == Lifecycle.RETIRED
    previous = status.conditions
    status.conditions = with_silence(merge(compute_conditions(
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


def refresh_status(agent: Agent, *, now: datetime, if_free: bool = False) -> None:
    """Conditions and health again, right after findings or escalations changed (in that
    transaction), so the agent's page is right before the pass settles. Convergence is left to
    the pass: only it has looked at the actual state.

    `if_free`: for an action that holds the agent's row and requests a pass after it commits
    (`status_if_free`): a status row a settling pass holds is left to it and to that pass."""
    status = status_if_free(agent) if if_free else locked_status(agent)
    if status is None:
        return
    ready = status.condition("Ready")
    failed = ready["message"] if ready and ready["reason"] == "ReconcileFailed" else ""
    apply_counts(agent, status, generation=status.observed_generation or agent.generation,
                 now=now, failed=failed)
    status.save(update_fields=["conditions", "open_findings", "health"])
