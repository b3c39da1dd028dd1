"""Enumerations of the registry."""

from django.db import models

# People's roles are every app's (audit's API checks them too), so they live in config; kept
# importable from here, where the registry's callers have always found them.
from config.roles import Role as Role


class Lifecycle(models.TextChoices):
    """Whether an agent runs, is held by the control plane, or is gone."""

    ACTIVE = "active"
    SUSPENDED = "suspended"
    RETIRED = "retired"


class VersionState(models.TextChoices):
    """Where a proposed desired state stands."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"
    WITHDRAWN = "withdrawn"


class VersionSource(models.TextChoices):
    """How a proposal reached the registry."""

    UI = "ui"
    API = "api"
    YAML = "yaml"
    AGENT = "agent"
    GIT = "git"


class GuardrailEffect(models.TextChoices):
    """What happens to a proposal whose spec fails a guardrail's expression."""

    DENY = "deny"
    REQUIRE_APPROVALS = "require_approvals"
    WARN = "warn"
    STEP_UP = "step_up"  # each approver must give a fresh second factor (registry/stepup.py)


class GuardrailOutcome(models.TextChoices):
    """The result of one guardrail on one proposal."""

    PASSED = "passed"
    DENIED = "denied"
    REQUIRES_APPROVALS = "requires_approvals"
    WARNED = "warned"
    REQUIRES_STEP_UP = "requires_step_up"
    ERROR = "error"  # evaluation failed: fail closed, the proposal is held


class ToxicEffect(models.TextChoices):
    """What happens to a proposal that would join the two sides of a toxic combination."""

    DENY = "deny"
    REQUIRE_APPROVALS = "require_approvals"


class OverdueEffect(models.TextChoices):
    """What an agent whose review date passed gets, chosen per guardrail by compliance."""

    WARN = "warn"  # the condition and an escalation; nothing else changes
    RESTRICT = "restrict"  # only the guardrail's named safe tools are allowed
    SUSPEND = "suspend"  # stopped until it is recertified (or a human resumes it)


class RiskLevel(models.TextChoices):
    """How risky an approved desired state is, which sets its default review interval."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class ReviewVerdict(models.TextChoices):
    """What one entry of a proposal's review thread says (approve and reject are recorded as
    Approval rows and the version's decision; the thread shows them in order with these)."""

    COMMENT = "comment"
    REQUEST_CHANGES = "request_changes"


class NotifyChannel(models.TextChoices):
    """Where a notification goes."""

    EMAIL = "email"
    WEBHOOK = "webhook"  # a Slack/Teams-compatible incoming webhook: POST {"text": ...}


class NotifyMode(models.TextChoices):
    """Each item as it comes, or gathered into one message every NOTIFY_DIGEST_MINUTES."""

    IMMEDIATE = "immediate"
    DIGEST = "digest"


class WaiverState(models.TextChoices):
    """A waiver is in force once it has every sign-off its equivalent spec change would need."""

    PENDING = "pending", "Pending a second approver"
    ACTIVE = "active", "In force"
