"""Enumerations of the reconciliation app."""

from django.db import models

from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from reconciliation.reconciler.diff import Area, DriftKind, OperationKind, Severity  # noqa: F401


class EnforcementMode(models.TextChoices):
    """What to do about drift in an enforcement area."""

    CORRECT = "correct"
    BLOCK = "block"
    ESCALATE = "escalate"
    LOG = "log"


class FindingStatus(models.TextChoices):
    """Where one drift stands."""

    OPEN = "open"  # seen, not yet acted on (or shadow / breaker paused)
    CORRECTING = "correcting"  # a change was applied; waiting for an observation that matches
    CORRECTED = "corrected"  # verified by a fresh observation; watched for the hold window
    REGRESSED = "regressed"  # came back within the hold window
    BLOCKED = "blocked"  # the agent was suspended until a human clears it
    ESCALATED = "escalated"  # handed to an approver
    ACCEPTED = "accepted"  # an approver accepted it into a proposal; held while that is decided
    LOGGED = "logged"  # recorded and allowed by enforcement mode `log`
    RESOLVED = "resolved"  # closed by a human or by a new approved version
    ACKNOWLEDGED = "acknowledged"  # behaviour an approver accepted as a one-off


OPEN_STATUSES = (FindingStatus.OPEN, FindingStatus.CORRECTING, FindingStatus.REGRESSED,
                 FindingStatus.BLOCKED, FindingStatus.ESCALATED, FindingStatus.ACCEPTED)


def _finding_transitions() -> dict[str, frozenset[str]]:
    """Where a finding may go from each status. A closed finding (verified, resolved,
    acknowledged) only reopens (a corrected one may also regress within its hold window) or
    is handed to a human; a change is applied only to drift the loop owns (never to one a
    human holds); only an applied change is verified. Anything else may be escalated,
    blocked, logged, accepted, acknowledged or resolved, by the loop or an approver's answer."""
    s = FindingStatus
    closed = {s.CORRECTED: {s.OPEN, s.REGRESSED, s.ESCALATED},
              s.RESOLVED: {s.OPEN, s.ESCALATED}, s.ACKNOWLEDGED: {s.OPEN, s.ESCALATED}}
    held_or_settled = {s.OPEN, s.ESCALATED, s.BLOCKED, s.LOGGED, s.ACCEPTED, s.ACKNOWLEDGED,
                       s.RESOLVED}
    live = {s.OPEN, s.REGRESSED, s.CORRECTING, s.LOGGED}
    table = {status: frozenset(targets) for status, targets in closed.items()}
    for status in set(s) - set(closed):
        targets = held_or_settled | ({s.CORRECTING} if status in live else set()) | (
            {s.CORRECTED} if status in (s.CORRECTING, s.REGRESSED) else set())
        table[status] = frozenset(targets)
    return table


FINDING_TRANSITIONS = _finding_transitions()

# The finding kind of a toxic path observed in the fleet (reconciliation/toxic_paths.py; the
# fleet view counts them).
TOXIC_PATH_KIND = "toxic_path"

# The audit action a finding's move to each status writes (reconciliation/actions/findings.py
# move_finding); to OPEN it is `finding.reopened` when the finding counted already (it was
# held: accepted, escalated, blocked) and `finding.opened` when it comes back from closed;
# from accepted back to a human (its proposal refused) it is `finding.reopened` too.
# None: the action that causes the move records it under its own name in the same transaction
# (correction.applied, escalation.opened, agent.suspended, escalation.resolved), so the
# trail says why; a second row would say the same thing twice.
FINDING_MOVE_AUDIT: dict[str, str | None] = {
    FindingStatus.OPEN: AuditAction.FINDING_OPENED,
    FindingStatus.REGRESSED: AuditAction.FINDING_REGRESSED,
    FindingStatus.CORRECTED: AuditAction.FINDING_CORRECTED,
    FindingStatus.RESOLVED: AuditAction.FINDING_RESOLVED,
    FindingStatus.LOGGED: AuditAction.FINDING_LOGGED,
    FindingStatus.ACKNOWLEDGED: AuditAction.FINDING_ACKNOWLEDGED,
    FindingStatus.CORRECTING: None,
    FindingStatus.ESCALATED: None,
    FindingStatus.BLOCKED: None,
    FindingStatus.ACCEPTED: None,
}
# The alert a move announces by default (its caller may name another or none).
FINDING_MOVE_ALERT: dict[str, AlertKind | None] = {
    FindingStatus.OPEN: AlertKind.DRIFT_DETECTED,  # only when it comes back from closed
    FindingStatus.REGRESSED: AlertKind.DRIFT_REGRESSED,
    FindingStatus.CORRECTED: AlertKind.DRIFT_CORRECTED,
}


class CorrectionResult(models.TextChoices):
    """The life of one keyed corrective change."""

    PENDING = "pending"
    APPLIED = "applied"
    VERIFIED = "verified"
    FAILED = "failed"
    SHADOW = "shadow"  # shadow mode or the breaker: recorded, not applied
    SUPERSEDED = "superseded"


class RunResult(models.TextChoices):
    """How a reconcile pass ended."""

    CONVERGED = "converged"
    CORRECTED = "corrected"
    CORRECTING = "correcting"
    DRIFTED = "drifted"  # drift left in place by mode (log/escalate/block/shadow/breaker)
    FAILED = "failed"
    SKIPPED = "skipped"


class Trigger(models.TextChoices):
    """Why a pass ran."""

    APPROVED = "approved"
    OBSERVATION = "observation"
    FINDING = "finding"
    GRANT_EXPIRED = "grant_expired"
    WAIVER_GRANTED = "waiver_granted"
    WAIVER_LAPSED = "waiver_lapsed"
    SHADOW_STARTED = "shadow_started"
    SHADOW_EXPIRED = "shadow_expired"
    WINDOW_ENDED = "window_ended"  # a maintenance window that held corrections ended
    MANUAL = "manual"
    RESYNC = "resync"
    VERIFY = "verify"
    RETRY = "retry"
    ESCALATION = "escalation"


class EscalationStatus(models.TextChoices):
    OPEN = "open"
    RESOLVED = "resolved"


class Resolution(models.TextChoices):
    """How an approver resolves an escalation."""

    REVERT = "revert"  # drift: correct the agent back to its approved state
    ACCEPT = "accept"  # drift: accept the observed state into a new proposal
    SUSPEND = "suspend"  # drift or behaviour: suspend the agent
    ACKNOWLEDGE = "acknowledge"  # behaviour: allowed as a one-off; the finding is closed
    RAISE_LIMIT = "raise_limit"  # behaviour: propose a spec that allows what was seen
    ALLOW = "allow"  # a pending runtime decision: allow it (once)
    DENY = "deny"  # a pending runtime decision: deny it


class EscalationKind(models.TextChoices):
    """What an escalation hands to a human, which decides how it can be resolved."""

    DRIFT = "drift"  # the configuration differs from the approved state
    BEHAVIOUR = "behaviour"  # what the agent did broke a rule (limits, sign-off, tools)
    DECISION = "decision"  # a runtime action waits for a human sign-off
    RECERTIFICATION = "recertification"  # the approved state's review date passed


RESOLUTIONS: dict[str, tuple[Resolution, ...]] = {
    EscalationKind.DRIFT: (Resolution.REVERT, Resolution.ACCEPT, Resolution.SUSPEND),
    EscalationKind.BEHAVIOUR: (Resolution.ACKNOWLEDGE, Resolution.SUSPEND,
                               Resolution.RAISE_LIMIT),
    EscalationKind.DECISION: (Resolution.ALLOW, Resolution.DENY),
    # Closed by approving a recertification; an approver may also stop the agent meanwhile.
    EscalationKind.RECERTIFICATION: (Resolution.SUSPEND,),
}


class ConditionType(models.TextChoices):
    READY = "Ready"
    DRIFTED = "Drifted"
    RECONCILING = "Reconciling"
    ESCALATED = "Escalated"
    SUSPENDED = "Suspended"
    RECERTIFIED = "Recertified"


class EventKind(models.TextChoices):
    """What a behaviour event records."""

    TOOL_CALL = "tool_call"
    DATA_ACCESS = "data_access"
    ACTION = "action"


class DecisionOutcome(models.TextChoices):
    ALLOW = "allow"
    DENY = "deny"
    PENDING = "pending"


class DecisionStatus(models.TextChoices):
    """The life of a runtime decision."""

    DECIDED = "decided"  # allow or deny at once
    PENDING = "pending"  # waiting for a human
    APPROVED = "approved"  # a human allowed it; single use
    REJECTED = "rejected"  # a human denied it
    EXPIRED = "expired"  # nobody answered in time: deny
    USED = "used"  # the allowed action was performed


class WebhookStatus(models.TextChoices):
    """Where the POST of a decided decision to the agent's `callback_url` stands."""

    NONE = "", "no webhook"
    PENDING = "pending"  # to be sent (queued, or waiting for its next attempt)
    DELIVERED = "delivered"  # the receiver answered 2xx
    REFUSED = "refused"  # the receiver answered 3xx or 4xx (not 429): not sent again
    NOT_ALLOWED = "not_allowed"  # DECISION_WEBHOOK_HOSTS no longer allows where it points
    FAILED = "failed"  # unreachable or 5xx/429 through every attempt


class BehaviourKind(models.TextChoices):
    """Kinds of behaviour findings (cross-call rules)."""

    RATE_LIMIT_EXCEEDED = "rate_limit_exceeded"
    SAME_RECORD_EXCEEDED = "same_record_exceeded"
    ACTION_WITHOUT_SIGNOFF = "action_without_signoff"
    ACTION_ABOVE_MAX = "action_above_max"
    TOOL_NOT_APPROVED = "tool_not_approved"
    RESOURCE_NOT_APPROVED = "resource_not_approved"
    DECISION_REUSED = "decision_reused"
    RAN_WHILE_SUSPENDED = "ran_while_suspended"
    ACTION_AMOUNT_UNREADABLE = "action_amount_unreadable"


class Health(models.TextChoices):
    """One word for where an agent stands, for counts and lists."""

    IN_POLICY = "in_policy"
    DRIFTED = "drifted"
    CORRECTING = "correcting"
    ESCALATED = "escalated"
    SUSPENDED = "suspended"
    FAILED = "failed"
    UNKNOWN = "unknown"
    RETIRED = "retired"  # no longer governed: never "in policy", whatever its findings


class BreakerScope(models.TextChoices):
    """What a blast-radius breaker counts and pauses: the cluster, one owner's or one team's
    agents (the `team` label)."""

    GLOBAL = "global"
    OWNER = "owner"
    TEAM = "team"


TEAM_LABEL = "team"  # the label whose value names an agent's team for the breaker
