"""Registry models: agents, their desired-state versions, approvals, guardrails, API tokens."""

import hashlib
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from registry.choices import (
    GuardrailEffect,
    Lifecycle,
    NotifyChannel,
    NotifyMode,
    OverdueEffect,
    ReviewVerdict,
    RiskLevel,
    ToxicEffect,
    VersionSource,
    VersionState,
    WaiverState,
)


def hash_token_key(key: str) -> str:
    """Tokens are stored as their SHA-256; the key itself is shown once and never kept."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class Agent(models.Model):
    """A registered AI agent: who owns it, how to reach it, and its active approved version."""

    name = models.SlugField(max_length=63, unique=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                              related_name="agents")
    labels = models.JSONField(default=dict, blank=True)
    description = models.TextField(blank=True, default="")
    framework = models.CharField(max_length=64, blank=True, default="")
    connector = models.JSONField(default=dict, blank=True)
    lifecycle = models.CharField(max_length=16, choices=Lifecycle.choices,
                                 default=Lifecycle.ACTIVE)
    # The generation of the active approved version; 0 until the first approval.
    generation = models.PositiveIntegerField(default=0)
    active_version = models.OneToOneField("DesiredStateVersion", null=True, blank=True,
                                          on_delete=models.PROTECT, related_name="+")
    # Recertification: when the approved state must be reviewed again, when the owner was
    # reminded of that date, and when it passed unreviewed (all reset by an approval).
    review_due_at = models.DateTimeField(null=True, blank=True, db_index=True)
    reminded_at = models.DateTimeField(null=True, blank=True)
    overdue_at = models.DateTimeField(null=True, blank=True)
    overdue_effect = models.CharField(max_length=10, choices=OverdueEffect.choices, blank=True,
                                      default="")
    # While overdue under a `restrict` guardrail: the only tools it may use (None: no limit).
    restricted_to = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["owner", "name"], name="agent_owner_name"),
                   models.Index(fields=["lifecycle", "name"], name="agent_lifecycle_name")]

    def __str__(self) -> str:
        return self.name

    @property
    def audit_label(self) -> str:
        return f"agent:{self.name}"

    @property
    def enforced_spec(self) -> dict:
        """The active approved spec as enforced now: an overdue agent under a `restrict`
        guardrail keeps only the safe tools."""
        spec = self.active_version.spec
        if self.restricted_to is None:
            return spec
        return {**spec, "tools": [t for t in spec["tools"] if t in self.restricted_to]}


class DesiredStateVersion(models.Model):
    """One proposed or approved desired state of an agent (a canonical spec and its hash)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions")
    # Set when approved: the agent's generation this version became.
    generation = models.PositiveIntegerField(null=True, blank=True)
    # The active generation the proposal was made against (optimistic locking).
    base_generation = models.PositiveIntegerField(default=0)
    spec = models.JSONField()
    spec_sha256 = models.CharField(max_length=64)
    metadata = models.JSONField(default=dict)
    state = models.CharField(max_length=16, choices=VersionState.choices,
                             default=VersionState.PENDING)
    source = models.CharField(max_length=8, choices=VersionSource.choices)
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.PROTECT, related_name="proposals")
    # For an agent-made proposal, the person holding the agent token it came through (who issued
    # it, or kept it after a hand-over): four eyes counts them as its proposer.
    token_holder = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                     on_delete=models.PROTECT, related_name="+")
    # How it arrived, when more than the proposer says it: the agent token, or the command line
    # and the OS user who ran it. Shown to approvers.
    origin = models.CharField(max_length=200, blank=True, default="")
    # Re-editing a pending proposal bumps the revision; approvals count for one revision only.
    revision = models.PositiveIntegerField(default=1)
    required_approvals = models.PositiveSmallIntegerField(default=1)
    guardrail_results = models.JSONField(default=list, blank=True)
    permission_changes = models.JSONField(default=list, blank=True)
    risk = models.PositiveIntegerField(default=0)
    held = models.BooleanField(default=False)  # a guardrail could not be evaluated: fail closed
    comment = models.TextField(blank=True, default="")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.PROTECT, related_name="+")
    decision_comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)
    # A recertification: the active spec again, approved to reset the review date.
    recertifies = models.BooleanField(default=False)
    # The proposer's review date, instead of the default for its risk level.
    review_after_seconds = models.PositiveIntegerField(null=True, blank=True)
    review_by = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "generation"],
                                    name="one_version_per_generation"),
        ]
        # The proposals list's order (registry.api.inbox_order), filtered by state or not: a
        # page of it reads 50 index entries, not a sort of every version in the fleet.
        indexes = [models.Index(fields=["state", "-risk", "-created_at", "-id"],
                                name="version_inbox"),
                   models.Index(fields=["-risk", "-created_at", "-id"], name="version_list")]

    def __str__(self) -> str:
        return f"{self.agent.name} proposal #{self.pk} ({self.state})"

    @property
    def is_agent_made(self) -> bool:
        return self.source == VersionSource.AGENT

    @property
    def review_text(self) -> str:
        """The proposer's own review date in words ("" when the policy's interval applies)."""
        if self.review_by is not None:
            return f"by {self.review_by:%Y-%m-%d %H:%M} UTC"
        if self.review_after_seconds:
            days, rest = divmod(self.review_after_seconds, 86_400)
            return (f"{days}d" if not rest else f"{self.review_after_seconds}s") + (
                " after approval")
        return ""


class Approval(models.Model):
    """One approver's yes for one revision of a proposal."""

    version = models.ForeignKey(DesiredStateVersion, on_delete=models.CASCADE,
                                related_name="approvals")
    approver = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                 related_name="approvals")
    revision = models.PositiveIntegerField()
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "approver", "revision"],
                                               name="one_approval_per_revision")]

    def __str__(self) -> str:
        return f"{self.approver} approved #{self.version_id} r{self.revision}"


class ComplianceRule(models.Model):
    """What compliance's rules share (guardrails, toxic combinations, group rules): a unique
    name, a description, on or off, and who made it when."""

    name = models.SlugField(max_length=63, unique=True)
    description = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Guardrail(ComplianceRule):
    """An org-wide policy: a CEL expression over spec and metadata that must hold."""

    expression = models.TextField()
    # Label equality selector: {"env": "prod"} applies to agents labelled env=prod; {} to all.
    selector = models.JSONField(default=dict, blank=True)
    effect = models.CharField(max_length=20, choices=GuardrailEffect.choices)
    required_approvals = models.PositiveSmallIntegerField(default=2)
    message = models.CharField(max_length=500)
    # What an agent it selects gets once its review date passed ("" : warn), and for
    # `restrict` the tools it keeps.
    overdue_effect = models.CharField(max_length=10, choices=OverdueEffect.choices, blank=True,
                                      default="")
    safe_tools = models.JSONField(default=list, blank=True)
    def to_dict(self) -> dict:
        """The audited form of a guardrail."""
        return {"name": self.name, "description": self.description,
                "expression": self.expression, "selector": self.selector,
                "effect": self.effect, "required_approvals": self.required_approvals,
                "message": self.message, "enabled": self.enabled,
                "overdue_effect": self.overdue_effect, "safe_tools": self.safe_tools}


class ApiToken(models.Model):
    """A bearer token (`Authorization: Token <key>`): a person's, or scoped to one agent."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    # When set, the token acts as this agent only (never with its issuer's roles).
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="tokens")
    name = models.CharField(max_length=100, blank=True, default="")
    key_hash = models.CharField(max_length=64, unique=True)
    key_prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Set when its agent was handed to a new owner: refused until that owner keeps it (or an
    # admin does), so an old owner keeps no way to act as the agent.
    suspended_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.key_prefix}… for {self.user}"

    def is_usable(self, now: timezone.datetime | None = None) -> bool:
        """Not revoked, not suspended by a hand-over, and not expired."""
        now = now or timezone.now()
        return (self.revoked_at is None and self.suspended_at is None
                and (self.expires_at is None or self.expires_at > now))

    @property
    def status(self) -> str:
        """active, expired, suspended (its agent changed owner) or revoked."""
        if self.revoked_at is not None:
            return "revoked"
        if self.suspended_at is not None:
            return "suspended"
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return "expired"
        return "active"

    @property
    def audit_label(self) -> str:
        return f"token:{self.key_prefix}"


class ConnectorSecretGrant(models.Model):
    """An admin's grant: this person's agents may sign their http connector with this secret."""

    secret = models.CharField(max_length=128)  # a name in settings.CONNECTOR_SECRETS
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="connector_secret_grants")
    granted_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["secret", "user"],
                                               name="unique_connector_secret_grant")]

    def __str__(self) -> str:
        return f"{self.secret} for {self.user}"


class Waiver(models.Model):
    """A time-boxed exception: drift and broken rules at a pointer are allowed until it ends."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="waivers")
    pointer = models.CharField(max_length=1000)
    reason = models.TextField()
    ticket = models.CharField(max_length=100)
    expires_at = models.DateTimeField()
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    # Set once the lapse is recorded (the audit says so); enforcement never waits for it.
    lapsed_at = models.DateTimeField(null=True, blank=True)
    # Withdrawn before its end (expires_at is then moved to that moment).
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    withdrawn_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                     on_delete=models.PROTECT, related_name="+")
    # Judged as the spec change it stands for: pending until it has as many distinct approvers
    # as that change would need (the grantor counts as the first).
    state = models.CharField(max_length=8, choices=WaiverState.choices,
                             default=WaiverState.ACTIVE)
    required_approvals = models.PositiveSmallIntegerField(default=1)
    confirmed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                     on_delete=models.PROTECT, related_name="+")
    confirmed_at = models.DateTimeField(null=True, blank=True)
    # The judgement: risk, guardrail verdicts, step-up reasons (as a proposal's).
    judgement = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["expires_at"]
        indexes = [models.Index(fields=["agent", "expires_at"], name="waiver_agent_expiry")]

    def __str__(self) -> str:
        return f"waiver #{self.pk} on {self.agent_id} {self.pointer}"

    def to_dict(self) -> dict:
        """The audited and served form of a waiver."""
        return {"id": self.pk, "agent": self.agent.name, "pointer": self.pointer,
                "reason": self.reason, "ticket": self.ticket,
                "expires_at": self.expires_at.isoformat().replace("+00:00", "Z"),
                "granted_by": self.granted_by.username, "created_at":
                self.created_at.isoformat().replace("+00:00", "Z"),
                "lapsed_at": self.lapsed_at.isoformat().replace("+00:00", "Z")
                if self.lapsed_at else None,
                "withdrawn_at": self.withdrawn_at.isoformat().replace("+00:00", "Z")
                if self.withdrawn_at else None,
                "withdrawn_by": self.withdrawn_by.username if self.withdrawn_by_id else None,
                "state": self.state, "required_approvals": self.required_approvals,
                "confirmed_by": self.confirmed_by.username if self.confirmed_by_id else None,
                "risk": self.judgement.get("risk", 0),
                "guardrails": self.judgement.get("guardrails", []),
                "step_up": bool(self.judgement.get("step_up_reasons"))}


class WaiverRequest(models.Model):
    """An owner's request for a waiver on their own agent (an owner never grants one): an
    approver or compliance grants it, as a waiver judged like any other, or declines it."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="waiver_requests")
    pointer = models.CharField(max_length=1000)
    reason = models.TextField()
    ticket = models.CharField(max_length=100)
    duration = models.CharField(max_length=16)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                     related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    state = models.CharField(max_length=16, choices=VersionState.choices,
                             default=VersionState.PENDING)  # pending, approved or rejected
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.PROTECT, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True, default="")
    waiver = models.ForeignKey(Waiver, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"waiver request #{self.pk} on {self.agent_id} {self.pointer} ({self.state})"

    def to_dict(self) -> dict:
        """The audited form of a request."""
        return {"id": self.pk, "agent": self.agent.name, "pointer": self.pointer,
                "reason": self.reason, "ticket": self.ticket, "duration": self.duration,
                "requested_by": self.requested_by.username, "state": self.state,
                "decided_by": self.decided_by.username if self.decided_by_id else None,
                "waiver": self.waiver_id, "decision_comment": self.decision_comment}


class ReviewInterval(models.Model):
    """Compliance's review interval for approved states of one risk level (the settings give
    the default while there is no row)."""

    level = models.CharField(max_length=8, choices=RiskLevel.choices, unique=True)
    seconds = models.PositiveIntegerField()
    # The lowest whole-spec risk score of this level (low is always 0).
    risk_from = models.PositiveIntegerField(default=0)
    updated_by = models.CharField(max_length=200)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.level}: {self.seconds}s"


class Retirement(models.Model):
    """An owner's proposal to retire an agent; an approver (four eyes) carries it out."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="retirements")
    reason = models.TextField()
    state = models.CharField(max_length=16, choices=VersionState.choices,
                             default=VersionState.PENDING)
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                    related_name="+")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"retirement #{self.pk} of {self.agent_id} ({self.state})"

    def to_dict(self) -> dict:
        """The audited and served form of a retirement."""
        return {"id": self.pk, "agent": self.agent.name, "reason": self.reason,
                "state": self.state, "proposed_by": self.proposed_by.username,
                "decided_by": self.decided_by.username if self.decided_by_id else None,
                "decision_comment": self.decision_comment}


class ToxicCombination(ComplianceRule):
    """Two capabilities compliance declares must never meet: no agent holding one may reach an
    agent holding the other (registry/toxic.py says what a path is)."""

    left = models.CharField(max_length=300)  # a capability, e.g. data:customers_db:read
    right = models.CharField(max_length=300)  # e.g. tool:email.send_external
    effect = models.CharField(max_length=20, choices=ToxicEffect.choices,
                              default=ToxicEffect.DENY)
    required_approvals = models.PositiveSmallIntegerField(default=2)
    def to_dict(self) -> dict:
        """The audited and served form."""
        return {"name": self.name, "description": self.description, "left": self.left,
                "right": self.right, "effect": self.effect,
                "required_approvals": self.required_approvals, "enabled": self.enabled}


class MeetingPoint(models.Model):
    """One place an agent's approved spec meets other agents (registry/toxic.py
    meeting_points), rewritten by each approval: the index a proposal's judge follows to read
    the agents it could join rather than the fleet (registry/toxic_fleet.py)."""

    # (no index of its own: the unique constraint's index starts with it)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="meeting_points",
                              db_index=False)
    point = models.CharField(max_length=100)  # an agent's name, or "mcp:" + 64 hex digits

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "point"],
                                               name="one_meeting_point_per_agent")]
        indexes = [models.Index(fields=["point", "agent"], name="meeting_point_agents")]

    def __str__(self) -> str:
        return f"{self.agent_id} at {self.point}"


class ReviewComment(models.Model):
    """One comment or "request changes" in a proposal's review thread, for the revision it
    was made on."""

    version = models.ForeignKey(DesiredStateVersion, on_delete=models.CASCADE,
                                related_name="review_comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                               related_name="+")
    verdict = models.CharField(max_length=16, choices=ReviewVerdict.choices,
                               default=ReviewVerdict.COMMENT)
    revision = models.PositiveIntegerField()
    body = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["version", "created_at"], name="review_thread")]

    def __str__(self) -> str:
        return f"{self.author} {self.verdict} on #{self.version_id} r{self.revision}"


class NotificationPreference(models.Model):
    """Where and how one approver (or one team, by agents' `team` label) hears about inbox
    items: email or an incoming webhook, immediately or as a digest."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.CASCADE, related_name="notification_preferences")
    team = models.CharField(max_length=63, blank=True, default="")
    channel = models.CharField(max_length=8, choices=NotifyChannel.choices)
    target = models.CharField(max_length=500)  # an email address or a webhook URL
    mode = models.CharField(max_length=10, choices=NotifyMode.choices,
                            default=NotifyMode.IMMEDIATE)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    last_digest_at = models.DateTimeField(null=True, blank=True)
    # Nothing but the verification token is sent to the address until it is confirmed.
    verified_at = models.DateTimeField(null=True, blank=True)
    verify_token_sha256 = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        constraints = [models.CheckConstraint(
            condition=(models.Q(user__isnull=False, team="")
                       | models.Q(user__isnull=True) & ~models.Q(team="")),
            name="preference_for_a_person_or_a_team")]

    def __str__(self) -> str:
        return f"{self.user or 'team ' + self.team} {self.channel} {self.mode}"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.pk, "user": self.user.username if self.user_id else None,
                "team": self.team or None, "channel": self.channel, "target": self.target,
                "mode": self.mode, "verified": self.verified_at is not None}


class Notification(models.Model):
    """One thing to tell one preference about one inbox item (a new item or an SLA breach):
    waiting for its digest, or sent (or failed) at a time. Unique per (preference, item, why):
    nobody hears twice about the same thing."""

    preference = models.ForeignKey(NotificationPreference, on_delete=models.CASCADE,
                                   related_name="notifications")
    item = models.CharField(max_length=40)  # the inbox key: proposal-12, escalation-5
    why = models.CharField(max_length=12)  # new | breach
    text = models.TextField()
    link = models.CharField(max_length=500)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["preference", "item", "why"],
                                               name="one_notification_per_item")]

    def __str__(self) -> str:
        return f"{self.why} {self.item} → {self.preference_id}"


class SlaBreach(models.Model):
    """An inbox item that passed its SLA or deadline: recorded once, so it alerts once."""

    item = models.CharField(max_length=40, unique=True)
    agent = models.CharField(max_length=63)
    deadline = models.DateTimeField()
    noticed_at = models.DateTimeField(default=timezone.now)
    notified = models.CharField(max_length=150, blank=True, default="")  # the next approver

    def __str__(self) -> str:
        return f"{self.item} breached {self.deadline:%Y-%m-%d %H:%M}"


class SingleSignOnIdentity(models.Model):
    """The identity provider's subject a person signs in as: matched on (issuer, sub) only, never
    on a username or email the provider asserts, so it can never take over a local account."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="sso_identity")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)
    last_signed_in_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"],
                                               name="one_user_per_sso_subject")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
