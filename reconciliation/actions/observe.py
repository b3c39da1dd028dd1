"""Observe: the findings a pass records from what it saw (drift found, or come back after a
correction), and the findings a human's proposal held, released before looking."""

from reconciliation.actions.common import open_escalation
from reconciliation.actions.findings import move_finding, open_finding
from reconciliation.actions.pass_context import PassContext
from reconciliation.actions.settle import refresh_status
from reconciliation.choices import FindingStatus
from reconciliation.diff import Drift
from reconciliation.models import Correction, Finding
from reconciliation.plan import FindingView
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
    move_finding(finding, FindingStatus.RESOLVED, reason=reason, agent=ctx.agent)


def _reopen(ctx: PassContext, finding: Finding, reason: str, *, escalate: bool = False
            ) -> None:
    """Back in the loop: open again, or (`escalate`) handed to a human again."""
    if escalate:  # the escalation's own row records the move
        open_escalation(ctx.agent, finding, reason=reason)
    else:
        move_finding(finding, FindingStatus.OPEN, reason=reason, agent=ctx.agent)


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
            finding = open_finding(
                agent, why=f"found by a {ctx.trigger} pass", after={"cause": cause},
                alert_fields={"cause": cause["key"]},
                fingerprint=drift.fingerprint, kind=drift.kind,
                pointer=drift.pointer, expected=drift.expected, actual=drift.actual,
                severity=drift.severity, area=drift.area, operation=drift.operation.to_dict(),
                observed_at=ctx.observed_at, cause_key=cause["key"], cause=cause,
                generation=ctx.generation, first_seen=now, detected_at=now, last_seen=now)
        elif finding.status in (FindingStatus.CORRECTED, FindingStatus.RESOLVED):
            came_back = drift.fingerprint in regressed
            cause = ctx.cause(drift)
            move_finding(
                finding, FindingStatus.REGRESSED if came_back else FindingStatus.OPEN,
                agent=agent, after={"cause": cause}, alert_fields={"cause": cause["key"]},
                why="the same drift came back within the hold window" if came_back
                else "the drift is back", cause_key=cause["key"], cause=cause,
                occurrence=finding.occurrence + 1,
                attempts=finding.attempts if came_back else 0, detected_at=now,
                last_seen=now, observed_at=ctx.observed_at, generation=ctx.generation)
        else:
            Finding.objects.filter(pk=finding.pk).update(last_seen=now)
        out[drift.fingerprint] = finding
    return out
