"""Verify: findings whose drift a fresh observation no longer shows are corrected (or resolved),
and a verification pass is scheduled while changes wait to be seen."""

from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from compliance.stops import stop_covering
from reconciliation.actions.common import SYSTEM, alert
from reconciliation.choices import CorrectionResult, FindingStatus
from reconciliation.models import Correction, Finding
from reconciliation.reconciler.pass_context import PassContext
from registry.choices import Lifecycle
from registry.models import Agent


def _suspended(agent: Agent) -> bool:
    return (Agent.objects.filter(pk=agent.pk, lifecycle=Lifecycle.SUSPENDED).exists()
            or stop_covering(agent) is not None)


def _schedule_verify(agent: Agent) -> None:
    from reconciliation.controller.handler import schedule_verify

    transaction.on_commit(lambda: schedule_verify(agent.pk), robust=True)


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
