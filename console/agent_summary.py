"""The top of an agent's page, as Argo CD's app header: health, sync, generation, last
verified and the open findings in sentences. Also served alone so the page can refresh it live
when an alert about the agent arrives."""

from typing import Any

from django.utils import timezone

from audit.sentences import drift_phrase
from reconciliation.choices import OPEN_STATUSES
from reconciliation.models import AgentStatus, Finding
from reconciliation.silence import heard
from reconciliation.sync import health_beside, status_words

OPEN_SHOWN = 20


def summary_context(agent: Any, *, operations: bool) -> dict[str, Any]:
    """What the header shows; open findings only for those who see the agent's operations."""
    status = AgentStatus.objects.filter(agent=agent).first()
    health, sync = status_words(status, agent.generation)
    health = health_beside(health, set(
        Finding.objects.filter(agent=agent, status__in=OPEN_STATUSES)
        .values_list("status", flat=True).distinct()))
    open_findings = []
    if operations:
        open_findings = [
            {"finding": f, "status": f.status, "severity": f.severity,
             "phrase": drift_phrase(f.kind, f.pointer, f.expected, f.actual)}
            for f in Finding.objects.filter(agent=agent, status__in=OPEN_STATUSES)
            .order_by("-detected_at")[:OPEN_SHOWN]]
    return {"summary": {
        "agent": agent, "health": health, "sync": sync, "status": status,
        "observed_generation": status.observed_generation if status else None,
        "converged_generation": status.converged_generation if status else None,
        "last_verified": status.last_reconciled_at if status else None,
        "open_count": status.open_findings if status else 0,
        "open_findings": open_findings, "operations": operations,
        "heard": heard(agent).line(timezone.now()) if agent.active_version_id else ""}}
