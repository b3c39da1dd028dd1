"""The loop's side of recertification (registry/actions/recertification.py announces it through
registry/signals.py; reconciliation/receivers.py answers here): the Recertified condition on
the agent's status, the recertification escalation an overdue review opens (with its alert
and, when the guardrails say so, a suspension) and closes once the agent is recertified."""

from datetime import datetime
from typing import Any

import audit
from audit.actors import RECERTIFICATION as SYSTEM
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from reconciliation.actions.common import alert, suspend_agent
from reconciliation.agent_status import status_if_free
from reconciliation.choices import EscalationKind, EscalationStatus
from reconciliation.models import Escalation
from reconciliation.recertified import with_recertified
from registry.choices import OverdueEffect
from registry.models import Agent, DesiredStateVersion


def refresh_condition(agent: Agent, now: datetime) -> None:
    """The Recertified condition on the agent's status, now (the page reads it at once).

    The caller holds the agent's row; a reconcile pass holds the status row and may then want
    the agent's, so waiting here for a pass could deadlock (it did, under an approval). A status
    row a pass holds is left to it and to the pass the caller requests, which write the
    condition from the agent's fields as committed."""
    status = status_if_free(agent)
    if status is None:
        return
    status.conditions = with_recertified(status.conditions, agent, now)
    status.save(update_fields=["conditions"])


def close_escalations(agent: Agent, *, actor: Any, version: DesiredStateVersion,
                      now: datetime) -> None:
    """The agent was recertified: its open recertification escalations are resolved, each
    audited."""
    for escalation in Escalation.objects.select_for_update(no_key=True).filter(
            agent=agent, subject=EscalationKind.RECERTIFICATION, status=EscalationStatus.OPEN):
        escalation.status, escalation.resolution = EscalationStatus.RESOLVED, "recertified"
        escalation.resolved_by, escalation.resolved_at = actor, now
        escalation.comment = f"recertified by proposal {version.pk}"
        escalation.save()
        audit.record(actor=actor, action=AuditAction.ESCALATION_RESOLVED,
                     target=f"escalation:{escalation.pk}", agent=agent.name,
                     after={"resolution": "recertified", "proposal": version.pk},
                     reason=escalation.comment)


def escalate_overdue(agent: Agent, *, why: str, effect: str, now: datetime) -> None:
    """The review date passed unrecertified: an escalation for the approvers (audited), a
    high-severity alert, and the suspension the guardrails asked for. An agent already
    suspended for another reason stays so, and recertifying must not lift that: its overdue
    effect is lowered to warn."""
    escalation = Escalation.objects.create(agent=agent, subject=EscalationKind.RECERTIFICATION,
                                           reason=why, opened_at=now)
    audit.record(actor=SYSTEM, action=AuditAction.ESCALATION_OPENED,
                 target=f"escalation:{escalation.pk}", agent=agent.name,
                 after={"subject": EscalationKind.RECERTIFICATION}, reason=why)
    alert(AlertKind.RECERTIFICATION_OVERDUE, agent, escalation=escalation.pk, severity="high",
          message=why)
    if effect == OverdueEffect.SUSPEND and not suspend_agent(agent, actor=SYSTEM, reason=why):
        Agent.objects.filter(pk=agent.pk).update(overdue_effect=OverdueEffect.WARN)
