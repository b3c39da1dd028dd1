"""Enumerated live alert names, as audit actions are: every alert names one of these, and the
sender refuses any other (reconciliation/alerts.py). The values are the wire names the
websocket's clients, the SIEM stream and Slack match on: never rename one.

A pure StrEnum here, at the foot of the apps, because the lowest reader is the pure sentence
writer beside it (audit/sentences.py) and registry announces proposals with it too."""

from enum import StrEnum


class AlertKind(StrEnum):
    """What a live alert announces."""

    DRIFT_DETECTED = "drift.detected"
    DRIFT_REGRESSED = "drift.regressed"
    DRIFT_CORRECTED = "drift.corrected"
    ROLLOUT_STARTED = "rollout.started"  # drift.detected while an approved version rolls out
    ROLLOUT_SYNCED = "rollout.synced"  # drift.corrected likewise
    ESCALATION_OPENED = "escalation.opened"
    ESCALATION_RESOLVED = "escalation.resolved"
    ESCALATION_SNOOZED = "escalation.snoozed"
    ESCALATION_WOKE = "escalation.woke"
    DECISION_PENDING = "decision.pending"
    AGENT_SUSPENDED = "agent.suspended"
    AGENT_SILENT = "agent.silent"
    AGENT_HEARD_AGAIN = "agent.heard_again"
    BREAKER_TRIPPED = "breaker.tripped"
    RECERTIFICATION_DUE = "recertification.due"
    RECERTIFICATION_OVERDUE = "recertification.overdue"
    INBOX_SLA_BREACHED = "inbox.sla_breached"
    PROPOSAL_PENDING = "proposal.pending"
    PROPOSAL_REVIEW = "proposal.review"
    PROPOSAL_DECIDED = "proposal.decided"
    FLEET_STOPPED = "fleet.stopped"
    AUDIT_SIGNING_REFUSED = "audit.signing_refused"
    # Sent by the websocket consumer alone (never recorded): catch-up left alerts out.
    CATCHUP_TRUNCATED = "catchup.truncated"
