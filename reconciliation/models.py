"""Observed state, reconcile runs, findings, corrections, escalations,
agent status (conditions) and the control plane's own switches (shadow mode, breaker)."""

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from audit.sentences import sentence
from config.errors import Conflict
from reconciliation.choices import (
    FINDING_TRANSITIONS,
    RESOLUTIONS,
    TEAM_LABEL,
    BreakerScope,
    CorrectionResult,
    EscalationKind,
    EscalationStatus,
    FindingStatus,
    Health,
    Resolution,
    RunResult,
    Trigger,
)
from registry.choices import Lifecycle
from registry.models import Agent
from registry.raised_limits import raise_limit


class ObservedState(models.Model):
    """A reported actual state; a new row only when it changed (heartbeats bump last_seen_at)."""

    # Null while the reporter is an unregistered (shadow) agent; set when it is adopted.
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="observations")
    unregistered = models.ForeignKey("runtime.UnregisteredAgent", null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="observations")
    state = models.JSONField()
    state_sha256 = models.CharField(max_length=64)
    source = models.CharField(max_length=16)  # push | http | sandbox
    reported_by = models.CharField(max_length=200)
    # Who or what changed the agent into this state, when the reporter knows (the platform's
    # changed_by / change_id, the drift lab's deployment): reconciliation/attribution.py.
    change = models.JSONField(null=True, blank=True)
    observed_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["agent", "-observed_at"], name="observed_agent_latest"),
                   models.Index(fields=["unregistered", "-observed_at"],
                                name="observed_shadow_latest")]

    def __str__(self) -> str:
        who = self.agent_id or f"unregistered {self.unregistered_id}"
        return f"{who} observed {self.observed_at:%Y-%m-%d %H:%M:%S}"

    @classmethod
    def latest_by_name(cls) -> dict[str, dict[str, Any]]:
        """Every live agent's latest observed state, by name, in one query."""
        latest = (cls.objects.filter(agent=models.OuterRef("pk")).order_by("-observed_at")
                  .values("state")[:1])
        rows = (Agent.objects.exclude(lifecycle=Lifecycle.RETIRED)
                .annotate(observed=models.Subquery(latest, output_field=models.JSONField()))
                .values_list("name", "observed"))
        states = {}
        for name, state in rows:
            if isinstance(state, str):  # some backends hand a subquery's JSON back as text
                state = json.loads(state)
            if isinstance(state, dict):
                states[name] = state
        return states


class AgentStatus(models.Model):
    """The reconciler's view of one agent: conditions, shadow mode, convergence."""

    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, related_name="status")
    conditions = models.JSONField(default=list)
    observed_generation = models.PositiveIntegerField(default=0)
    shadow = models.BooleanField(default=False)
    # One agent's shadow ends by itself here (at most 30 days after it was switched on).
    shadow_until = models.DateTimeField(null=True, blank=True)
    # The owner's request for shadow mode, waiting for a second person: {by, by_id, seconds,
    # duration, reason, at}; {} when none waits.
    shadow_request = models.JSONField(default=dict, blank=True)
    converged = models.BooleanField(default=False)
    converged_generation = models.PositiveIntegerField(null=True, blank=True)
    last_reconciled_at = models.DateTimeField(null=True, blank=True)
    open_findings = models.PositiveIntegerField(default=0)
    health = models.CharField(max_length=12, choices=Health.choices, default=Health.UNKNOWN,
                              db_index=True)
    # The last pass found no diff between this desired state (version, suspension) and the
    # observed state with this digest, valid until `in_sync_until` (the soonest moment the pass
    # said it must run again: a grant's end, a waiver's lapse, a shadow's end). The
    # resync skips the agent in SQL while all of it still holds; "" means look again.
    in_sync_version = models.PositiveIntegerField(null=True, blank=True)
    in_sync_suspended = models.BooleanField(default=False)
    in_sync_observed_sha256 = models.CharField(max_length=64, blank=True, default="")
    in_sync_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"status of {self.agent_id}"

    def condition(self, kind: str) -> dict[str, Any] | None:
        """One condition by type."""
        return next((c for c in self.conditions if c["type"] == kind), None)

    def conditions_for(self, agent: Agent) -> list[dict[str, Any]]:
        """The conditions as a reader should take them: while a newer generation is approved
        than the last pass reconciled (a rollout), Ready is False, reason Progressing, not
        the last pass's "matches generation N"; every condition keeps the generation the
        controller observed, as Kubernetes' observedGeneration does."""
        observed = self.observed_generation
        if agent.lifecycle == Lifecycle.RETIRED:  # no longer judged: never "Ready"
            ready = {"type": "Ready", "status": "False", "reason": "Retired",
                     "message": "retired: no longer reconciled or judged",
                     "lastTransitionTime": agent.updated_at.isoformat().replace("+00:00", "Z"),
                     "observedGeneration": observed}
            return [ready if c["type"] == "Ready" else c for c in self.conditions]
        if not observed or agent.generation <= observed:
            return self.conditions
        ready = {"type": "Ready", "status": "False", "reason": "Progressing",
                 "message": f"generation {agent.generation} is approved and not reconciled "
                            f"yet; the last pass saw generation {observed}",
                 "lastTransitionTime": agent.updated_at.isoformat().replace("+00:00", "Z"),
                 "observedGeneration": observed}
        return [ready if c["type"] == "Ready" else c for c in self.conditions]


class ReconcileRun(models.Model):
    """One reconcile pass over one agent."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs")
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    generation = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.PositiveIntegerField(default=0)
    drift_found = models.PositiveIntegerField(default=0)
    changes = models.JSONField(default=list)
    result = models.CharField(max_length=16, choices=RunResult.choices)
    shadow = models.BooleanField(default=False)
    error = models.TextField(blank=True, default="")  # what people see
    # What really failed (an address, a status); shown to admins only: it can map the network.
    error_detail = models.TextField(blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["agent", "-started_at"], name="run_agent_latest"),
                   models.Index(fields=["started_at"], name="run_started")]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.agent_id}: {self.result}"


class IllegalTransition(Conflict):
    """A finding was asked to move where its status does not allow (see FINDING_TRANSITIONS)."""


class Finding(models.Model):
    """One drift, fingerprinted so the same drift stays one finding (with first and last seen)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="findings")
    fingerprint = models.CharField(max_length=64)
    kind = models.CharField(max_length=32)
    pointer = models.CharField(max_length=500)
    expected = models.JSONField(null=True)
    actual = models.JSONField(null=True)
    severity = models.CharField(max_length=8)
    area = models.CharField(max_length=16)
    operation = models.JSONField(null=True)
    status = models.CharField(max_length=12, choices=FindingStatus.choices,
                              default=FindingStatus.OPEN)
    generation = models.PositiveIntegerField()
    # Each return of the same drift after a verified correction is a new occurrence, so its
    # corrective change gets a new idempotency key.
    occurrence = models.PositiveIntegerField(default=1)
    attempts = models.PositiveIntegerField(default=0)
    reason = models.TextField(blank=True, default="")
    # Found in what the agent did (cross-call rules), not in its configuration.
    behaviour = models.BooleanField(default=False)
    # An approver resolved its escalation with "revert": correct it whatever the area's mode.
    revert_ordered = models.BooleanField(default=False)
    first_seen = models.DateTimeField(default=timezone.now)
    detected_at = models.DateTimeField(default=timezone.now)  # start of this occurrence
    # When the state (or event) that shows the drift was observed: detected_at - observed_at
    # is the time to detect.
    observed_at = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(default=timezone.now)
    corrected_at = models.DateTimeField(null=True, blank=True)
    hold_until = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                        on_delete=models.PROTECT, related_name="+")
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    # The proposal an approver accepted it into (held as `accepted` until that is decided).
    proposal = models.ForeignKey("registry.DesiredStateVersion", null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="+")
    # What caused this occurrence, when anything knows (reconciliation/attribution.py):
    # findings from one deployment, platform change or proposal share one key.
    cause_key = models.CharField(max_length=200, default="unknown")
    cause = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "fingerprint"],
                                               name="one_finding_per_drift")]
        indexes = [models.Index(fields=["cause_key", "-detected_at"], name="finding_cause"),
                   models.Index(fields=["status", "-last_seen"], name="finding_status"),
                   models.Index(fields=["detected_at"], name="finding_detected"),
                   models.Index(fields=["agent", "status"], name="finding_agent_status"),
                   # /findings/ unfiltered: a page of 50 reads 50 index entries, no sort
                   models.Index(fields=["-last_seen", "-id"], name="finding_recent")]

    def __str__(self) -> str:
        return f"{self.kind} {self.pointer} on {self.agent_id} ({self.status})"

    def transition(self, to: str, *, reason: str | None = None, at: datetime | None = None,
                   save: bool = True, **fields: Any) -> list[str]:
        """Move this finding to status `to` (the only place its status changes): refuses a
        move FINDING_TRANSITIONS does not allow, stamps the time the new status carries (a
        verified correction's time and hold window, an acknowledgement's time), sets
        `reason` and any other `fields`, and saves just those unless `save` is False.
        Returns the names of the fields it set."""
        if to not in FINDING_TRANSITIONS[self.status]:
            raise IllegalTransition(f"A finding cannot go from {self.status} to {to}.",
                                    code="illegal_transition")
        at = at or timezone.now()
        stamps: dict[str, Any] = {}
        if to == FindingStatus.CORRECTED:
            stamps = {"corrected_at": at, "hold_until": at + timedelta(
                seconds=settings.RECONCILE_HOLD_SECONDS)}
        elif to == FindingStatus.ACKNOWLEDGED:
            stamps = {"acknowledged_at": at}
        changed = {"status": to, **stamps, **fields}
        if reason is not None:
            changed["reason"] = reason
        for name, value in changed.items():
            setattr(self, name, value)
        if save:
            self.save(update_fields=list(changed))
        return list(changed)

    def to_dict(self) -> dict[str, Any]:
        """The audited form."""
        return {"kind": self.kind, "pointer": self.pointer, "expected": self.expected,
                "actual": self.actual, "severity": self.severity, "status": self.status,
                "occurrence": self.occurrence, "attempts": self.attempts,
                "cause": self.cause_key}


class Correction(models.Model):
    """One keyed corrective change; connectors treat a repeated key as already done."""

    finding = models.ForeignKey(Finding, on_delete=models.CASCADE, related_name="corrections")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="corrections")
    # No database constraint: runs are partitioned by day on PostgreSQL (their key is
    # (id, started_at)), and retention unlinks corrections before a day of runs is dropped.
    run = models.ForeignKey(ReconcileRun, null=True, on_delete=models.SET_NULL,
                            related_name="corrections", db_constraint=False)
    idempotency_key = models.CharField(max_length=64, unique=True)
    operation = models.JSONField()
    attempts = models.PositiveIntegerField(default=0)
    result = models.CharField(max_length=12, choices=CorrectionResult.choices,
                              default=CorrectionResult.PENDING)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    applied_at = models.DateTimeField(null=True, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"correction {self.idempotency_key[:12]} ({self.result})"


@dataclass(frozen=True)
class ResolutionOption:
    """One way to resolve an escalation, as its resolve form offers it."""

    value: str  # a Resolution
    label: str
    danger: bool = False
    disabled: str = ""  # why it cannot be chosen here (shown next to the disabled button)


RESOLUTION_LABELS: dict[str, tuple[str, bool]] = {
    Resolution.REVERT: ("↺ Revert", False),
    Resolution.ACCEPT: ("✚ Accept into a proposal", False),
    Resolution.SUSPEND: ("⊘ Suspend the agent", True),
    Resolution.ACKNOWLEDGE: ("✔ Acknowledge as a one-off", False),
    Resolution.ALLOW: ("✔ Allow once", False),
    Resolution.DENY: ("✖ Deny", True),
}


class EscalationQuerySet(models.QuerySet):
    def awake(self, now: datetime | None = None) -> "EscalationQuerySet":
        """Open and not snoozed at `now`: what waits in the approvers' queue."""
        now = now or timezone.now()
        return self.filter(status=EscalationStatus.OPEN).filter(
            models.Q(snoozed_until__isnull=True) | models.Q(snoozed_until__lte=now))

    def snoozed(self, now: datetime | None = None) -> "EscalationQuerySet":
        """Open and snoozed at `now`: out of the queue until their time comes."""
        return self.filter(status=EscalationStatus.OPEN,
                           snoozed_until__gt=now or timezone.now())


class Escalation(models.Model):
    """Drift, behaviour or a runtime action handed to an approver; what they may answer
    depends on its kind (see choices.RESOLUTIONS)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="escalations")
    decision = models.OneToOneField("runtime.Decision", null=True, blank=True,
                                    on_delete=models.CASCADE, related_name="escalation")
    finding = models.ForeignKey(Finding, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="escalations")
    reason = models.TextField()
    # "recertification" for an overdue review; "" when the finding or decision says the kind.
    subject = models.CharField(max_length=16, blank=True, default="")
    status = models.CharField(max_length=10, choices=EscalationStatus.choices,
                              default=EscalationStatus.OPEN)
    resolution = models.CharField(max_length=16, blank=True, default="")
    comment = models.TextField(blank=True, default="")
    opened_at = models.DateTimeField(default=timezone.now)
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                 on_delete=models.PROTECT, related_name="+")
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    snoozed_until = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.PROTECT, related_name="+")
    resolved_at = models.DateTimeField(null=True, blank=True)
    # The person behind what caused it: whoever sent the events that broke the rule, or the
    # issuer of the agent token that sent them. Four eyes keeps them from closing it.
    caused_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                  on_delete=models.SET_NULL, related_name="+")

    objects = EscalationQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["status", "opened_at"], name="escalation_open")]

    def __str__(self) -> str:
        return f"escalation {self.pk} for {self.agent_id} ({self.status})"

    @property
    def kind(self) -> str:
        """decision, behaviour (a broken runtime rule) or drift (configuration)."""
        if self.subject == EscalationKind.RECERTIFICATION:
            return EscalationKind.RECERTIFICATION
        if self.decision_id is not None:
            return EscalationKind.DECISION
        if self.finding is not None and self.finding.behaviour:
            return EscalationKind.BEHAVIOUR
        return EscalationKind.DRIFT

    def resolutions(self) -> list[ResolutionOption]:
        """The ways this escalation may be resolved (by its kind, choices.RESOLUTIONS): the
        resolve form offers exactly these, the API lists them and resolve_escalation accepts
        nothing else. A behaviour limit that cannot be raised is offered disabled, saying why."""
        return [self._option(Resolution(value)) for value in RESOLUTIONS[self.kind]]

    def _option(self, resolution: Resolution) -> ResolutionOption:
        if resolution == Resolution.RAISE_LIMIT:
            offer, refusal = self.raise_offer()
            if refusal:
                return ResolutionOption(resolution, "⇧ Raise the limit", disabled=refusal)
            return ResolutionOption(resolution, f"⇧ Propose: {offer}")
        return ResolutionOption(resolution, *RESOLUTION_LABELS[resolution])

    @staticmethod
    def read_for_offers(escalations: list["Escalation"]) -> list["Escalation"]:
        """Read, in one query, the approved versions that the behaviour escalations among
        `escalations` (loaded with agent and finding) need for their raise offers. Other
        escalations need none, so a page of drift cards decodes no spec."""
        agents = [e.agent for e in escalations
                  if e.finding is not None and e.finding.behaviour]
        models.prefetch_related_objects(agents, "active_version")
        return escalations

    def raise_offer(self) -> tuple[str, str]:
        """For a behaviour escalation: what "raise the limit" would propose, or why it cannot."""
        finding, agent = self.finding, self.agent
        if self.kind != EscalationKind.BEHAVIOUR or agent.active_version is None:
            return "", "only a behaviour finding on an approved agent has a limit to raise"
        try:
            _, change = raise_limit(agent.active_version.spec, finding.kind, finding.pointer,
                                    finding.actual)
        except ValueError as error:
            return "", str(error)
        return change, ""

    @property
    def is_snoozed(self) -> bool:
        """Snoozed now (a past snooze time means it is back in the queue)."""
        return self.snoozed_until is not None and self.snoozed_until > timezone.now()


class ControlState(models.Model):
    """The control plane's global switches: shadow mode and the blast-radius breaker."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    shadow = models.BooleanField(default=False)
    breaker_tripped_at = models.DateTimeField(null=True, blank=True)
    breaker_reason = models.TextField(blank=True, default="")
    # When each breaker ("global", "owner:alice", "team:payments") was last reset: a breaker
    # counts only findings detected after its reset, so the wave it tripped on cannot trip it
    # again (ISO 8601 instants; a scope never reset is absent).
    breaker_resets = models.JSONField(default=dict, blank=True)
    # Passes that found drift on a converged agent with no new approved version (must stay 0).
    post_convergence_drift = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return "control state"

    @classmethod
    def load(cls) -> "ControlState":
        return cls.objects.get_or_create(pk=1)[0]


class BreakerTrip(models.Model):
    """A blast-radius breaker tripped for one owner's or one team's agents (the cluster's own
    breaker is on ControlState); automatic correction of those agents waits for compliance."""

    scope = models.CharField(max_length=200, unique=True)  # owner:<username> | team:<value>
    tripped_at = models.DateTimeField()
    reason = models.TextField()

    def __str__(self) -> str:
        return self.scope

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "tripped_at": self.tripped_at.isoformat(),
                "reason": self.reason}

    @staticmethod
    def scopes_of(agent: Agent) -> list[str]:
        """The scoped breakers that cover an agent: its owner's, and its team's if labelled."""
        scopes = [f"{BreakerScope.OWNER}:{agent.owner.username}"]
        team = (agent.labels or {}).get(TEAM_LABEL)
        if team:
            scopes.append(f"{BreakerScope.TEAM}:{team}")
        return scopes


class AlertEvent(models.Model):
    """A live alert, kept so that a browser that lost its connection catches up by id."""

    at = models.DateTimeField(default=timezone.now)
    event = models.CharField(max_length=32)
    agent_name = models.CharField(max_length=63, blank=True, default="")
    owner_id = models.IntegerField(null=True, blank=True)  # for "my agents" subscriptions
    severity = models.CharField(max_length=8, blank=True, default="")
    payload = models.JSONField(default=dict)

    class Meta:
        indexes = [models.Index(fields=["at"], name="alert_at")]

    def __str__(self) -> str:
        return f"alert {self.pk} {self.event}"

    def to_message(self) -> dict[str, Any]:
        """What a websocket client receives."""
        message = {**self.payload, "id": self.pk, "event": self.event,
                   "at": self.at.isoformat(), "agent": self.agent_name or None,
                   "severity": self.severity or None, "owner_id": self.owner_id}
        return {**message, "line": sentence(message)}


class Silence(models.Model):
    """A stretch during which an agent was not heard from for longer than its expected
    heartbeat (registered, or only seen in traffic); open while ended_at is null."""

    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="silences")
    agent_name = models.CharField(max_length=63)  # also for agents only seen in traffic
    expected_seconds = models.PositiveIntegerField()
    last_heard_at = models.DateTimeField(null=True, blank=True)  # null: never heartbeated
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent_name"],
                                               condition=models.Q(ended_at__isnull=True),
                                               name="one_open_silence_per_agent")]
        indexes = [models.Index(fields=["started_at"], name="silence_started")]

    def __str__(self) -> str:
        return f"silence of {self.agent_name} since {self.started_at:%Y-%m-%d %H:%M:%S}"

    def to_dict(self) -> dict[str, Any]:
        """The audited and served form."""
        def stamp(value: datetime | None) -> str | None:
            return value.isoformat().replace("+00:00", "Z") if value else None

        return {"agent": self.agent_name, "registered": self.agent_id is not None,
                "expected_seconds": self.expected_seconds,
                "last_heard_at": stamp(self.last_heard_at),
                "started_at": stamp(self.started_at), "ended_at": stamp(self.ended_at)}
class FleetSnapshot(models.Model):
    """The fleet view and the fleet's toxic paths as a worker last computed them (one row,
    pk=1): pages and APIs read it instead of judging every agent per request."""

    as_of = models.DateTimeField()
    took_ms = models.PositiveIntegerField(default=0)
    fleet = models.JSONField()  # reconciliation.fleet.fleet_view(), its lists capped
    toxic_paths = models.JSONField()  # {"approved"|"observed": [path], "..._count": n}

    def __str__(self) -> str:
        return f"fleet snapshot as of {self.as_of:%Y-%m-%d %H:%M:%S}"

