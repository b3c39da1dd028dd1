"""Observe, the first stage: everything a pass judges, read once. The findings a human's
proposal held are released first (the approved spec may hold what was seen), then the agent's
platform is asked for its actual state (recorded when a connector pulled it), and the rows the
plan needs are read: findings, waivers in force (lapsed ones recorded), holds and breakers."""

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction

from reconciliation.actions.common import held_still
from reconciliation.actions.escalations import open_escalation
from reconciliation.actions.findings import move_finding
from reconciliation.actions.observations import record_observation
from reconciliation.actions.switches import end_expired_shadow
from reconciliation.agent_status import refresh_status
from reconciliation.choices import FindingStatus
from reconciliation.connectors import ConnectorError, connector_for
from reconciliation.models import AgentStatus, ControlState, Correction, Finding
from reconciliation.reconciler.pass_context import PassContext
from reconciliation.reconciler.plan import FindingView
from registry.actions.waivers import waivers_in_force
from registry.choices import Lifecycle, VersionState
from registry.models import Agent, Waiver


@dataclass
class Observed:
    """What the pass judges: the agent and its actual state (`ctx`), and what the plan needs."""

    ctx: PassContext
    connector: Any = None
    control: ControlState | None = None  # read, not locked: a converged pass takes no lock
    error: ConnectorError | None = None  # the platform could not be asked
    released_behaviour: bool = False  # held behaviour was decided before looking
    suspended: bool = False  # must not run (suspended, or under a stop)
    was_converged: bool = False  # converged at this generation before this pass
    shadow_until: datetime | None = None
    findings: dict[str, FindingView] = field(default_factory=dict)
    waivers: dict[str, Waiver] = field(default_factory=dict)  # in force, by pointer


def _reconciled(agent_id: int) -> Agent | None:
    """The agent as committed now, when the loop reconciles it (approved, not retired)."""
    agent = (Agent.objects.select_related("active_version", "owner").filter(pk=agent_id)
             .first())
    if agent is None or agent.active_version_id is None or (
            agent.lifecycle == Lifecycle.RETIRED):
        return None
    return agent


def observe(agent_id: int, *, trigger: str, now: datetime, started: float | None = None
            ) -> Observed | None:
    """Read what one pass judges; None when the agent is not reconciled (gone, unapproved,
    retired)."""
    started = time.monotonic() if started is None else started
    agent = _reconciled(agent_id)
    if agent is None:
        return None
    # before observing: a push agent may not have reported yet
    held, released_behaviour = _release_accepted(
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
            # the status row only: the agent's row is read for its name, never changed here
            status = (AgentStatus.objects.select_for_update(no_key=True, of=("self",))
                      .select_related("agent").get(pk=status.pk))
            end_expired_shadow(status, now)
    ctx = PassContext(agent, trigger, now, started, agent.generation,
                      shadow=control.shadow or status.shadow)
    seen = Observed(ctx, connector_for(agent), control, released_behaviour=released_behaviour,
                    shadow_until=status.shadow_until if status.shadow else None)
    try:
        actual = seen.connector.observe(agent)
    except ConnectorError as error:
        seen.error = error
        return seen
    if actual is None:
        return seen
    ctx.actual = actual
    ctx.witnesses = getattr(seen.connector, "witnesses", None)
    if seen.connector.name != "push":
        ctx.change = getattr(seen.connector, "last_change", None)
        row, _ = record_observation(agent, actual, actor=f"connector:{seen.connector.name}",
                                    source=seen.connector.name, trigger_reconcile=False,
                                    change=ctx.change)
        ctx.observed_at = min(row.observed_at, ctx.now)  # read by this pass: seen now
    else:  # the agent's own report, read with it
        ctx.observed_at, ctx.change = seen.connector.observed_at, seen.connector.last_change
    seen.was_converged = status.converged and status.converged_generation == agent.generation
    ctx.converged_generation = status.converged_generation
    seen.waivers = {w.pointer: w for w in waivers_in_force(agent, now)}  # lapses recorded
    seen.suspended = held_still(agent)
    seen.findings = _finding_views(agent)
    return seen


def _finding_views(agent: Agent) -> dict[str, FindingView]:
    findings = list(Finding.objects.filter(agent=agent, behaviour=False))
    applied = {}
    for fingerprint, applied_at in (Correction.objects.filter(
            agent=agent, applied_at__isnull=False).values_list(
            "finding__fingerprint", "applied_at") if findings else ()):
        applied[fingerprint] = max(applied_at, applied.get(fingerprint, applied_at))
    return {
        f.fingerprint: FindingView(f.fingerprint, f.status, f.occurrence, f.attempts,
                                   applied.get(f.fingerprint), f.hold_until, f.revert_ordered)
        for f in findings
    }


def _release_accepted(ctx: PassContext) -> tuple[bool, bool]:
    """Drift an approver accepted into a proposal is held while that proposal is pending. Once
    it is approved the finding is resolved (the approved state holds what was seen: a pass that
    still sees drift opens it again). Once it is refused, withdrawn or superseded, configuration
    drift is back in the loop; behaviour, which cannot be observed again, is escalated again.
    First, true when the agent had accepted drift: the caller reads the agent again, since an
    approval deciding it may have committed after the agent was read (none held: nothing to
    misjudge); second, true when held behaviour was decided."""
    held = list(Finding.objects.filter(agent=ctx.agent, status=FindingStatus.ACCEPTED)
                .select_related("proposal"))
    if not held:
        return False, False  # the usual case: one read, no transaction
    with transaction.atomic():
        return _release(ctx, held)


def _release(ctx: PassContext, held: list[Finding]) -> tuple[bool, bool]:
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
    return True, any(f.behaviour for f in decided)


def _resolve(ctx: PassContext, finding: Finding, reason: str) -> None:
    move_finding(finding, FindingStatus.RESOLVED, reason=reason, agent=ctx.agent)


def _reopen(ctx: PassContext, finding: Finding, reason: str, *, escalate: bool = False
            ) -> None:
    """Back in the loop: open again, or (`escalate`) handed to a human again."""
    if escalate:  # the escalation's own row records the move
        open_escalation(ctx.agent, finding, reason=reason)
    else:
        move_finding(finding, FindingStatus.OPEN, reason=reason, agent=ctx.agent)
