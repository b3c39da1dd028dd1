"""Enumerations of the reconciliation app."""

from django.db import models

from reconciliation.diff import Area, DriftKind, OperationKind, Severity  # noqa: F401


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
    LOGGED = "logged"  # recorded and allowed by enforcement mode `log`
    RESOLVED = "resolved"  # closed by a human or by a new approved version


OPEN_STATUSES = (FindingStatus.OPEN, FindingStatus.CORRECTING, FindingStatus.REGRESSED,
                 FindingStatus.BLOCKED, FindingStatus.ESCALATED)


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

    REVERT = "revert"  # correct the agent back to its approved state
    ACCEPT = "accept"  # accept the observed state into a new proposal
    SUSPEND = "suspend"  # suspend the agent


class ConditionType(models.TextChoices):
    READY = "Ready"
    DRIFTED = "Drifted"
    RECONCILING = "Reconciling"
    ESCALATED = "Escalated"
    SUSPENDED = "Suspended"
