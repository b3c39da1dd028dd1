"""Humans resolving escalations, clearing blocks and acknowledging findings."""

from datetime import datetime, timedelta
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
    """An approver resolves with one of `escalation.resolutions()`: revert (correct back),
    accept (propose the observed state) or suspend for drift; allow or deny for a pending
    decision. Always with a comment; never for an agent they own."""
    from registry import actions as registry_actions
    from registry.choices import VersionSource

    _check_decider(actor)
    if not comment.strip():
        raise Invalid("Resolving an escalation needs a comment.",
                      details=[{"pointer": "/comment", "message": "required"}])
    escalation = (Escalation.objects.select_for_update(of=("self",))
                  .select_related("agent__active_version", "finding").filter(pk=escalation_id)
                  .first())
    if escalation is None:
        from config.errors import NotFound

        raise NotFound(f"No escalation {escalation_id}.")
    if escalation.status != EscalationStatus.OPEN:
        raise Conflict(f"Escalation {escalation_id} is already resolved.", code="not_open")
    agent = escalation.agent
    offered = [option.value for option in escalation.resolutions()]
    if resolution not in offered:
        what = "A pending decision" if escalation.decision_id is not None else "Drift"
        listed = f"{', '.join(offered[:-1])} or {offered[-1]}" if len(offered) > 1 else offered[0]
        raise Invalid(f"{what} is resolved with {listed}.",
                      details=[{"pointer": "/resolution", "message": ", ".join(offered)}])
    resolution = Resolution(resolution)
    if escalation.decision_id is not None:
        # A pending runtime decision: the answer is allow or deny, nothing else.
        from reconciliation.actions.decisions import decide_pending

        decide_pending(str(escalation.decision_id), actor=actor,
                       allow=resolution == Resolution.ALLOW, comment=comment)
        escalation.refresh_from_db()
        return escalation
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
    cleared = list(Finding.objects.select_for_update().filter(
        agent=agent, status=FindingStatus.BLOCKED).order_by("pk"))
    Finding.objects.filter(pk__in=[f.pk for f in cleared]).update(
        status=FindingStatus.RESOLVED, reason=f"cleared by {audit_label(actor)}: {reason}")
    for finding in cleared:
        # One row per finding: the compliance timeline reads when each drift stopped counting.
        audit.record(actor=actor, action=AuditAction.FINDING_RESOLVED,
                     target=f"finding:{finding.pk}", agent=agent.name,
                     before={"status": FindingStatus.BLOCKED},
                     after={"status": FindingStatus.RESOLVED}, reason=reason)
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
                      acknowledge: bool = False, snooze_for: timedelta | None = None,
                      snooze_until: datetime | None = None) -> Escalation:
    """An approver takes an escalation (assign to me), acknowledges it, or snoozes it for a
    while or until a time (in the future, at most 7 days away); it comes back on its own."""
    _check_decider(actor)
    now = timezone.now()
    if snooze_for is not None and snooze_until is not None:
        raise Invalid("Snooze for a while or until a time, not both.",
                      details=[{"pointer": "/snooze_until", "message": "one of the two"}])
    if snooze_for is not None:
        snooze_until = now + snooze_for
    if snooze_until is not None:
        if timezone.is_naive(snooze_until):
            raise Invalid("A snooze time needs its time zone.",
                          details=[{"pointer": "/snooze_until", "message": "with an offset"}])
        if snooze_until <= now:
            raise Invalid("Snooze until a time in the future.",
                          details=[{"pointer": "/snooze_until", "message": "in the future"}])
        if snooze_until > now + SNOOZE_LIMIT:
            raise Invalid("Snooze for at most 7 days.",
                          details=[{"pointer": "/snooze_until", "message": "at most 7 days"}])
    escalation = Escalation.objects.select_for_update().select_related("agent").filter(
        pk=escalation_id, status=EscalationStatus.OPEN).first()
    if escalation is None:
        raise Conflict(f"Escalation {escalation_id} is not open.", code="not_open")
    if escalation.agent.owner_id == actor.pk:
        # Snoozing or claiming it would keep it from the other approvers who must decide it.
        raise NotAllowed("Four eyes: you cannot triage an escalation for an agent you own.",
                         code="four_eyes")
    before = _triage_state(escalation)
    if assign:
        escalation.assignee = actor
    if acknowledge:
        escalation.acknowledged_at = now
    if snooze_until is not None:
        escalation.snoozed_until = snooze_until
        transaction.on_commit(lambda: _schedule_wake(escalation.pk, snooze_until), robust=True)
    escalation.save()
    audit.record(actor=actor, action=AuditAction.ESCALATION_TRIAGED,
                 target=f"escalation:{escalation.pk}", agent=escalation.agent.name,
                 before=before, after=_triage_state(escalation))
    if snooze_until is not None:
        # Other approvers' inbox counts drop now; the wake-up alert raises them again.
        alert("escalation.snoozed", escalation.agent, escalation=escalation.pk,
              until=snooze_until.isoformat())
    return escalation


def _triage_state(escalation: Escalation) -> dict[str, Any]:
    return {"assignee": escalation.assignee_id,
            "acknowledged": bool(escalation.acknowledged_at),
            "snoozed_until": escalation.snoozed_until.isoformat()
            if escalation.snoozed_until else None}


def _schedule_wake(escalation_id: int, until: datetime) -> None:
    import django_rq

    from reconciliation.jobs import not_before, wake_escalation_job

    django_rq.get_queue("default", commit_mode="auto").enqueue_at(
        not_before(until), wake_escalation_job, escalation_id)


@transaction.atomic
def announce_awake(escalation_id: int) -> bool:
    """A snoozed escalation whose time came is back in the queue by itself (the queue filters
    on the time); this only tells the approvers' inboxes so their counts go up live. Changes
    no state, so it writes an alert and no audit row. True when it announced."""
    escalation = Escalation.objects.select_related("agent").filter(pk=escalation_id).first()
    if escalation is None or escalation.status != EscalationStatus.OPEN or (
            escalation.snoozed_until is None or escalation.is_snoozed):
        return False  # resolved meanwhile, or snoozed again (that snooze has its own wake-up)
    alert("escalation.woke", escalation.agent, escalation=escalation.pk,
          message=f"back from snooze: {escalation.reason}")
    return True
