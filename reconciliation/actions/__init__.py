"""Every state change of the reconcile loop. Each writes its audit rows in the same transaction
and sends alerts after commit."""

from audit.actors import RECONCILER as SYSTEM
from reconciliation.actions.common import (
    audit_label,
    desired_now,
    state_hash,
    suspend_agent,
)
from reconciliation.actions.escalations import (
    acknowledge_finding,
    announce_awake,
    authorise_acknowledgement,
    authorise_escalation,
    open_escalation,
    resolve_escalation,
    resume_agent,
    triage_escalation,
)
from reconciliation.actions.incidents import incident_members, resolve_incident, triage_many
from reconciliation.actions.observations import (
    note_unregistered_observation,
    record_observation,
    record_observed_part,
)
from reconciliation.actions.switches import approve_shadow, reset_breaker, set_shadow
from reconciliation.reconciler.passes import converged_check, reconcile_agent

__all__ = [
    "SYSTEM", "acknowledge_finding", "announce_awake",
    "audit_label", "authorise_acknowledgement", "authorise_escalation",
    "converged_check", "desired_now",
    "note_unregistered_observation", "open_escalation", "reconcile_agent",
    "record_observation", "record_observed_part",
    "reset_breaker", "resolve_escalation", "resume_agent",
    "set_shadow", "approve_shadow", "state_hash", "suspend_agent",
    "triage_escalation", "incident_members", "resolve_incident", "triage_many",
]
