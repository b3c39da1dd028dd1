"""A stop: the fleet, a team, a label selector or one owner refused everything at once."""

from typing import Any

from django.conf import settings
from django.db import models

from compliance.choices import StopScope
from registry.guardrails import selector_matches


class Stop(models.Model):
    """One press of the stop button: every agent it covers is denied every decision and shown
    as not running (its adapters and proxies refuse every call) until a second person approves
    the lift that someone asked for."""

    scope = models.CharField(max_length=16, choices=StopScope.choices)
    # team: {"team": <value>}; selector: the labels an agent must all carry; else {}
    selector = models.JSONField(default=dict, blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True,
                              blank=True, related_name="+")
    reason = models.TextField()
    stopped_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                   related_name="+")
    stopped_at = models.DateTimeField()
    # the agents it covered when it was placed (agents registered later into its scope are
    # stopped too: coverage is judged on every look)
    agents = models.JSONField(default=list, blank=True)
    lift_requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                          null=True, blank=True, related_name="+")
    lift_requested_at = models.DateTimeField(null=True, blank=True)
    lift_reason = models.TextField(blank=True, default="")
    lifted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                  null=True, blank=True, related_name="+")
    lifted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["lifted_at"], name="stop_lifted_at")]

    def __str__(self) -> str:
        return f"stop {self.pk} ({self.describe()})"

    @property
    def active(self) -> bool:
        return self.lifted_at is None

    def describe(self) -> str:
        """What it reaches, in words: "the whole fleet", "team payments", ..."""
        if self.scope == StopScope.FLEET:
            return "the whole fleet"
        if self.scope == StopScope.TEAM:
            return f"team {self.selector.get('team', '')}"
        if self.scope == StopScope.OWNER:
            return f"{self.owner.username if self.owner else '?'}'s agents"
        return "agents labelled " + ", ".join(f"{k}={v}" for k, v in sorted(
            self.selector.items()))

    def covers(self, agent: Any) -> bool:
        """Whether this stop reaches `agent` (while it is active)."""
        if self.scope == StopScope.FLEET:
            return True
        if self.scope == StopScope.OWNER:
            return agent.owner_id == self.owner_id
        return selector_matches(self.selector, agent.labels or {})

    def to_dict(self) -> dict[str, Any]:
        def name(user: Any) -> str | None:
            return user.username if user is not None else None

        return {"id": self.pk, "scope": self.scope, "selector": self.selector,
                "owner": name(self.owner), "reaches": self.describe(), "reason": self.reason,
                "stopped_by": name(self.stopped_by), "stopped_at": self.stopped_at,
                "agents": self.agents, "active": self.active,
                "lift_requested_by": name(self.lift_requested_by),
                "lift_requested_at": self.lift_requested_at, "lift_reason": self.lift_reason,
                "lifted_by": name(self.lifted_by), "lifted_at": self.lifted_at}


class MaintenanceWindow(models.Model):
    """A scheduled window for the agents a label selector picks ({} picks every agent): drift
    found in it is recorded, and its corrections wait for the window's end, except the
    operation kinds listed in `allowed`. It ends on time by itself: a job at `ends_at` asks
    for a pass of every agent it covered."""

    selector = models.JSONField(default=dict, blank=True)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    allowed = models.JSONField(default=list, blank=True)  # operation kinds that still run
    reason = models.TextField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                   related_name="+")
    created_at = models.DateTimeField()
    cancelled_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                     null=True, blank=True, related_name="+")
    cancelled_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)  # when its end was recorded

    class Meta:
        indexes = [models.Index(fields=["ends_at"], name="maintenance_ends_at")]

    def __str__(self) -> str:
        return f"maintenance window {self.pk}"

    def covers(self, agent: Any) -> bool:
        return selector_matches(self.selector, agent.labels or {})

    def open_at(self, now: Any) -> bool:
        """In force at `now`: started, not ended, not cancelled."""
        return self.cancelled_at is None and self.starts_at <= now < self.ends_at

    def describe(self) -> str:
        return ("every agent" if not self.selector else "agents labelled " + ", ".join(
            f"{k}={v}" for k, v in sorted(self.selector.items())))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.pk, "selector": self.selector, "reaches": self.describe(),
                "starts_at": self.starts_at, "ends_at": self.ends_at, "allowed": self.allowed,
                "reason": self.reason, "created_by": self.created_by.username,
                "created_at": self.created_at,
                "cancelled_by": self.cancelled_by.username if self.cancelled_by else None,
                "cancelled_at": self.cancelled_at, "ended_at": self.ended_at}


class FrameworkControl(models.Model):
    """One version of a control compliance staff added or re-mapped: its title and the
    evidence queries that show it. Versions are never changed; the newest of a (framework,
    control) wins over the shipped library (compliance/controls/*.yaml), a retired one removes
    the control."""

    framework = models.CharField(max_length=63)
    control_id = models.CharField(max_length=40)
    version = models.PositiveIntegerField()
    title = models.CharField(max_length=200, blank=True, default="")
    queries = models.JSONField(default=list, blank=True)
    retired = models.BooleanField(default=False)
    reason = models.TextField()
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                   related_name="+")
    changed_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["framework", "control_id", "version"],
                                               name="framework_control_version")]
        ordering = ["framework", "control_id", "version"]

    def __str__(self) -> str:
        return f"{self.framework} {self.control_id} v{self.version}"

    def to_dict(self) -> dict[str, Any]:
        return {"framework": self.framework, "control_id": self.control_id,
                "version": self.version, "title": self.title, "queries": self.queries,
                "retired": self.retired, "reason": self.reason,
                "changed_by": self.changed_by.username, "changed_at": self.changed_at}
