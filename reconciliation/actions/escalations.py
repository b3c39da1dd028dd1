"""Humans resolving escalations, clearing blocks and acknowledging findings."""

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config.errors import Conflict, Invalid, NotAllowed
from reconciliation.actions.common import alert, audit_label, suspend_agent
from reconciliation.choices import (
    EscalationStatus,
    FindingStatus,
    Resolution,
    Trigger,
)
from reconciliation.models import (
    Escalation,
    Finding,
)
from reconciliation.triggers import request_reconcile
from registry.choices import Lifecycle, Role
from registry.models import Agent
from registry.roles import has_role


def _check_decider(actor: Any) -> None:
    if not has_role(actor, Role.APPROVER) or not getattr(actor, "pk", None):
        raise NotAllowed("Only approvers resolve escalations.")


@transaction.atomic
def resolve_escalation(escalation_id: int, *, actor: Any, resolution: str,
                       comment: str) -> Escalation:
    """An approver resolves: revert (correct back), accept (propose the observed state), or
    suspend. Always with a comment; never for an agent they own."""
    from registry import actions as registry_actions
    from registry.choices import VersionSource

    _check_decider(actor)
    if not comment.strip():
        raise Invalid("Resolving an escalation needs a comment.",
                      details=[{"pointer": "/comment", "message": "required"}])
    resolution = Resolution(resolution)
    escalation = (Escalation.objects.select_for_update(of=("self",))
                  .select_related("agent__active_version", "finding").filter(pk=escalation_id)
                  .first())
    if escalation is None:
        from config.errors import NotFound

        raise NotFound(f"No escalation {escalation_id}.")
    if escalation.status != EscalationStatus.OPEN:
        raise Conflict(f"Escalation {escalation_id} is already resolved.", code="not_open")
    agent = escalation.agent
    if escalation.decision_id is not None:
        # A pending runtime decision: the answer is allow or deny, nothing else.
        if resolution not in (Resolution.ALLOW, Resolution.DENY):
            raise Invalid("A pending decision is resolved with allow or deny.",
                          details=[{"pointer": "/resolution", "message": "allow or deny"}])
        from reconciliation.actions.decisions import decide_pending

        decide_pending(str(escalation.decision_id), actor=actor,
                       allow=resolution == Resolution.ALLOW, comment=comment)
        escalation.refresh_from_db()
        return escalation
    if resolution in (Resolution.ALLOW, Resolution.DENY):
        raise Invalid("Drift is resolved with revert, accept or suspend.",
                      details=[{"pointer": "/resolution", "message": "revert, accept, suspend"}])
    if agent.owner_id == actor.pk:
        raise NotAllowed("Four eyes: you cannot resolve an escalation for an agent you own.",
                         code="four_eyes")
    finding = escalation.finding
    now = timezone.now()
    if resolution == Resolution.REVERT:
        if finding is not None:
            # Back to the loop as an ordinary correction under a fresh key.
            # Back to the loop as an ordinary correction, whatever the area's mode says.
            Finding.objects.filter(pk=finding.pk).update(
                status=FindingStatus.OPEN, attempts=0, revert_ordered=True,
                reason=f"revert ordered by {actor.username}")
    elif resolution == Resolution.ACCEPT:
        latest = agent.observations.order_by("-observed_at").first()
        if latest is None:
            raise Conflict("There is no observed state to accept.", code="no_observation")
        spec = dict(agent.active_version.spec)
        accepted = {key: latest.state[key] for key in ("tools", "data", "actions", "limits",
                                                       "grants", "model", "version")
                    if key in latest.state}
        spec.update(accepted)
        from registry.intake import read_spec

        registry_actions.propose(
            agent, read_spec(spec), agent.active_version.metadata, actor=actor,
            source=VersionSource.UI, comment=f"accepted from escalation {escalation.pk}",
            from_escalation=True)
        if finding is not None:
            Finding.objects.filter(pk=finding.pk).update(
                status=FindingStatus.ACCEPTED,
                reason="accepted into a proposal: held until it is approved or refused")
    else:
        suspend_agent(agent, actor=actor, reason=f"escalation {escalation.pk}: {comment}")
        if finding is not None:
            Finding.objects.filter(pk=finding.pk).update(status=FindingStatus.BLOCKED,
                                                         reason="suspended by an approver")
    escalation.status = EscalationStatus.RESOLVED
    escalation.resolution = resolution
    escalation.comment = comment
    escalation.resolved_by = actor
    escalation.resolved_at = now
    escalation.save()
    audit.record(actor=actor, action=AuditAction.ESCALATION_RESOLVED,
                 target=f"escalation:{escalation.pk}", agent=agent.name,
                 after={"resolution": resolution.value}, reason=comment)
    alert("escalation.resolved", agent, finding, escalation=escalation.pk,
           resolution=resolution.value)
    request_reconcile(agent.pk, Trigger.ESCALATION)
    return escalation


@transaction.atomic
def resume_agent(agent: Agent, *, actor: Any, reason: str) -> None:
    """A human clears a block: the agent is active again and its blocked findings resolved."""
    if not (has_role(actor, Role.APPROVER) or has_role(actor, Role.COMPLIANCE)):
        raise NotAllowed("Only approvers or compliance staff clear a block.")
    if not reason.strip():
        raise Invalid("Clearing a block needs a reason.",
                      details=[{"pointer": "/reason", "message": "required"}])
    updated = Agent.objects.filter(pk=agent.pk, lifecycle=Lifecycle.SUSPENDED).update(
        lifecycle=Lifecycle.ACTIVE, updated_at=timezone.now())
    if not updated:
        raise Conflict(f"{agent.name} is not suspended.", code="not_suspended")
    Finding.objects.filter(agent=agent, status=FindingStatus.BLOCKED).update(
        status=FindingStatus.RESOLVED, reason=f"cleared by {audit_label(actor)}: {reason}")
    audit.record(actor=actor, action=AuditAction.AGENT_RESUMED, target=f"agent:{agent.name}",
                 agent=agent.name, before={"lifecycle": "suspended"},
                 after={"lifecycle": "active"}, reason=reason)
    request_reconcile(agent.pk, Trigger.MANUAL)


@transaction.atomic
def acknowledge_finding(finding_id: int, *, actor: Any, reason: str) -> Finding:
    """Compliance acknowledges a finding with a reason (it stays in the record)."""
    if not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed("Only compliance staff acknowledge findings.")
    if not reason.strip():
        raise Invalid("Acknowledging needs a reason.",
                      details=[{"pointer": "/reason", "message": "required"}])
    finding = Finding.objects.select_for_update().select_related("agent").filter(
        pk=finding_id).first()
    if finding is None:
        from config.errors import NotFound

        raise NotFound(f"No finding {finding_id}.")
    finding.acknowledged_by = actor
    finding.acknowledged_at = timezone.now()
    finding.save(update_fields=["acknowledged_by", "acknowledged_at"])
    audit.record(actor=actor, action=AuditAction.FINDING_ACKNOWLEDGED,
                 target=f"finding:{finding.pk}", agent=finding.agent.name, reason=reason)
    return finding


SNOOZE_LIMIT = timedelta(days=7)


@transaction.atomic
def triage_escalation(escalation_id: int, *, actor: Any, assign: bool = False,
                      acknowledge: bool = False, snooze_for: timedelta | None = None
                      ) -> Escalation:
    """An approver takes an escalation (assign to me), acknowledges it, or snoozes it."""
    _check_decider(actor)
    escalation = Escalation.objects.select_for_update().select_related("agent").filter(
        pk=escalation_id, status=EscalationStatus.OPEN).first()
    if escalation is None:
        raise Conflict(f"Escalation {escalation_id} is not open.", code="not_open")
    if escalation.agent.owner_id == actor.pk:
        # Snoozing or claiming it would keep it from the other approvers who must decide it.
        raise NotAllowed("Four eyes: you cannot triage an escalation for an agent you own.",
                         code="four_eyes")
    before = {"assignee": escalation.assignee_id, "acknowledged": bool(escalation.acknowledged_at),
              "snoozed_until": escalation.snoozed_until.isoformat()
              if escalation.snoozed_until else None}
    now = timezone.now()
    if assign:
        escalation.assignee = actor
    if acknowledge:
        escalation.acknowledged_at = now
    if snooze_for is not None:
        if not timedelta(0) < snooze_for <= SNOOZE_LIMIT:
            raise Invalid("Snooze for up to 7 days.",
                          details=[{"pointer": "/snooze", "message": "1 minute to 7 days"}])
        escalation.snoozed_until = now + snooze_for
    escalation.save()
    audit.record(actor=actor, action=AuditAction.ESCALATION_TRIAGED,
                 target=f"escalation:{escalation.pk}", agent=escalation.agent.name,
                 before=before,
                 after={"assignee": escalation.assignee_id,
                        "acknowledged": bool(escalation.acknowledged_at),
                        "snoozed_until": escalation.snoozed_until.isoformat()
                        if escalation.snoozed_until else None})
    return escalation
