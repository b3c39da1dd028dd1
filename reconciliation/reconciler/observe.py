"""Observe: the findings a pass records from what it saw (drift found, or come back after a
correction), and the findings a human's proposal held, released before looking."""

import audit
from audit.choices import AuditAction
from reconciliation.actions.common import SYSTEM, alert, open_escalation
from reconciliation.choices import FindingStatus
from reconciliation.models import Correction, Finding
from reconciliation.reconciler.diff import Drift
from reconciliation.reconciler.pass_context import PassContext
from reconciliation.reconciler.plan import FindingView
from reconciliation.reconciler.settle import refresh_status
from registry.choices import VersionState
from registry.models import Agent


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


def _release_accepted(ctx: PassContext) -> bool:
    """Drift an approver accepted into a proposal is held while that proposal is pending. Once
    it is approved the finding is resolved (the approved state holds what was seen: a pass that
    still sees drift opens it again). Once it is refused, withdrawn or superseded, configuration
    drift is back in the loop; behaviour, which cannot be observed again, is escalated again.
    True when the agent had accepted drift: the caller reads the agent again, since an approval
    deciding it may have committed after the agent was read (none held: nothing to misjudge)."""
    held = list(Finding.objects.filter(agent=ctx.agent, status=FindingStatus.ACCEPTED)
                .select_related("proposal"))
    decided = [f for f in held if f.proposal_id and f.proposal.state != VersionState.PENDING]
    for finding in decided:
        proposal = finding.proposal
        if proposal.state == VersionState.APPROVED:
            how = "allowed from" if finding.behaviour else "accepted into"
            _resolve(ctx, finding, f"{how} generation {proposal.generation} on (proposal "
                                   f"{proposal.pk} was approved)")
        elif finding.behaviour:
            _reopen(ctx, finding, f"proposal {proposal.pk} to allow it was {proposal.state}: "
                                  "a human decides again", escalate=True)
        else:
            _reopen(ctx, finding,
                    f"proposal {proposal.pk} that accepted it was {proposal.state}")
    if any(f.behaviour for f in decided):
        refresh_status(ctx.agent, now=ctx.now)
    unlinked = [f for f in held if not f.proposal_id]  # its proposal is gone
    if unlinked and not ctx.agent.versions.filter(state=VersionState.PENDING).exists():
        for finding in unlinked:
            _reopen(ctx, finding, "the proposal that accepted it is gone")
    return bool(held)


def _resolve(ctx: PassContext, finding: Finding, reason: str) -> None:
    finding.transition(FindingStatus.RESOLVED, reason=reason)
    audit.record(actor=SYSTEM, action=AuditAction.FINDING_RESOLVED,
                 target=f"finding:{finding.pk}", agent=ctx.agent.name,
                 before={"status": FindingStatus.ACCEPTED},
                 after={"status": FindingStatus.RESOLVED}, reason=reason)


def _reopen(ctx: PassContext, finding: Finding, reason: str, *, escalate: bool = False
            ) -> None:
    """Back in the loop: open again, or (`escalate`) handed to a human again."""
    status = FindingStatus.ESCALATED if escalate else FindingStatus.OPEN
    if not escalate:
        finding.transition(status, reason=reason)
    audit.record(actor=SYSTEM, action=AuditAction.FINDING_REOPENED,
                 target=f"finding:{finding.pk}", agent=ctx.agent.name,
                 before={"status": FindingStatus.ACCEPTED}, after={"status": status},
                 reason=reason)
    if escalate:  # after the reopened row: the escalation's own row follows it
        open_escalation(ctx.agent, finding, reason=reason)


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
