"""Deciding an incident once, and triaging many escalations at once, from the inbox."""

from typing import Any

from django.db import transaction
from django.utils import timezone

import audit
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from config.errors import Invalid
from reconciliation.actions.common import alert
from reconciliation.actions.escalations import (
    authorise_escalation,
    refuse_too_late,
    settle_escalation,
    triage_escalation,
)
from reconciliation.actions.findings import move_finding
from reconciliation.choices import EscalationStatus, FindingStatus, Resolution
from reconciliation.incidents import escalation_key, named_change
from reconciliation.models import Escalation, Finding

MAX_BULK = 200


def incident_members(escalation: Escalation) -> list[Escalation]:
    """The open escalations of `escalation`'s incident (itself first), by the incident key."""
    if escalation.finding_id is None:
        return [escalation]
    key = escalation_key(escalation)
    where = ({"finding__cause_key": escalation.finding.cause_key}  # one change, any agent
             if named_change(escalation.finding.cause_key) else
             {"agent_id": escalation.agent_id})
    siblings = (Escalation.objects.filter(status=EscalationStatus.OPEN, **where)
                .exclude(pk=escalation.pk).select_related("finding").order_by("pk"))
    return [escalation, *(e for e in siblings if escalation_key(e) == key)]


def resolve_incident(escalation_id: int, *, actor: Any, resolution: str,
                     comment: str) -> list[Escalation]:
    """One decision for every escalation one cause produced: each is resolved with the same
    resolution and comment (each with its own audit row); accepting makes one proposal that
    holds all their findings, not one per finding. An answer to a decision that expired
    meanwhile is refused after its closing as expired has committed."""
    resolved = _resolve_incident(escalation_id, actor=actor, resolution=resolution,
                                 comment=comment)
    for escalation in resolved:
        refuse_too_late(escalation)
    return resolved


@transaction.atomic
def _resolve_incident(escalation_id: int, *, actor: Any, resolution: str,
                      comment: str) -> list[Escalation]:
    first = authorise_escalation(escalation_id, actor=actor, lock=True)
    members = incident_members(first)
    if resolution == Resolution.ACCEPT and len({m.agent_id for m in members}) > 1:
        raise Invalid("This change touched several agents: accept it into each agent's "
                      "desired state from that agent's escalations, or revert or suspend "
                      "all of them here.", details=[
                          {"pointer": "/resolution", "message": "revert or suspend"}])
    # Accepting the incident proposes its findings' changes together, and nothing else.
    siblings = [m.finding for m in members[1:] if m.finding is not None]
    resolved = [settle_escalation(first.pk, actor=actor, resolution=resolution,
                                   comment=comment, with_findings=siblings
                                   if resolution == Resolution.ACCEPT else None)]
    proposal = None
    if resolution == Resolution.ACCEPT:
        proposal = (Finding.objects.filter(pk=first.finding_id)
                    .values_list("proposal_id", flat=True).first())
    for sibling in members[1:]:
        if proposal is not None:
            resolved.append(_accepted_with(sibling, proposal, actor=actor, comment=comment))
        else:
            resolved.append(settle_escalation(sibling.pk, actor=actor, resolution=resolution,
                                               comment=comment))
    return resolved


def _accepted_with(escalation: Escalation, proposal_id: int, *, actor: Any,
                   comment: str) -> Escalation:
    """A sibling of an accepted escalation: its drift is in the same proposal."""
    escalation = authorise_escalation(escalation.pk, actor=actor, lock=True)
    now = timezone.now()
    if escalation.finding is not None:
        move_finding(
            escalation.finding, FindingStatus.ACCEPTED, proposal_id=proposal_id, actor=actor,
            agent=escalation.agent,
            reason="accepted into a proposal: held until it is approved or refused")
    escalation.status = EscalationStatus.RESOLVED
    escalation.resolution = Resolution.ACCEPT
    escalation.comment = comment
    escalation.resolved_by = actor
    escalation.resolved_at = now
    escalation.save()
    audit.record(actor=actor, action=AuditAction.ESCALATION_RESOLVED,
                 target=f"escalation:{escalation.pk}", agent=escalation.agent.name,
                 after={"resolution": Resolution.ACCEPT.value, "proposal": proposal_id},
                 reason=comment)
    alert(AlertKind.ESCALATION_RESOLVED, escalation.agent, escalation=escalation.pk,
          resolution=Resolution.ACCEPT.value)
    return escalation


@transaction.atomic
def triage_many(escalation_ids: list[int], *, actor: Any, assign: bool = False,
                acknowledge: bool = False) -> list[Escalation]:
    """Assign to me and/or acknowledge several escalations (and every escalation of their
    incidents) at once: all or none, each with its own audit row."""
    if not (assign or acknowledge):
        raise Invalid("Choose assign, acknowledge or both.",
                      details=[{"pointer": "/action", "message": "assign or acknowledge"}])
    if not escalation_ids or len(escalation_ids) > MAX_BULK:
        raise Invalid(f"Choose between 1 and {MAX_BULK} items.",
                      details=[{"pointer": "/escalations", "message": f"1 to {MAX_BULK} ids"}])
    done: dict[int, Escalation] = {}
    for pk in escalation_ids:
        for member in incident_members(authorise_escalation(pk, actor=actor, triage=True)):
            if member.pk not in done:
                done[member.pk] = triage_escalation(member.pk, actor=actor, assign=assign,
                                                    acknowledge=acknowledge)
    return list(done.values())
