"""Rules over groups of agents and the windows they found over their limit (imported by
reconciliation.models so Django sees them)."""

from typing import Any

from django.db import models
from django.utils import timezone

from registry.models import ComplianceRule
from runtime.group_rules import EFFECTS, MEASURES, GroupRuleSpec


class GroupRule(ComplianceRule):
    """Compliance's rule over a group of agents: one window counted across all of them."""

    # {"labels": {...}, "owner": username, "team": value, "framework": name}; {} selects all.
    selector = models.JSONField(default=dict, blank=True)
    # {"kind", "action", "resource", "tool"}: which events count ({} counts every event).
    match = models.JSONField(default=dict, blank=True)
    measure = models.CharField(max_length=8, choices=[(m, m) for m in MEASURES])
    limit = models.FloatField()
    per = models.CharField(max_length=8)
    per_record = models.BooleanField(default=False)  # one window per resource record
    effect = models.CharField(max_length=8, choices=[(e, e) for e in EFFECTS],
                              default="escalate")
    # 2 to 5: an agent's decision request that would take the window over the limit waits
    # for this many distinct approvers (1: the rule only counts what happened).
    required_approvals = models.PositiveSmallIntegerField(default=1)
    # A block reaches the agents of owners who contributed nothing to the window only when
    # compliance chose so for this rule (audited with the rule).
    across_owners = models.BooleanField(default=False)
    # Bumped on each change: a changed rule counts in fresh windows.
    revision = models.PositiveIntegerField(default=1)

    def to_dict(self) -> dict[str, Any]:
        """The audited form."""
        return {"name": self.name, "description": self.description, "selector": self.selector,
                "match": self.match, "measure": self.measure, "limit": self.limit,
                "per": self.per, "per_record": self.per_record, "effect": self.effect,
                "required_approvals": self.required_approvals, "enabled": self.enabled,
                "across_owners": self.across_owners, "revision": self.revision}

    def to_spec(self) -> GroupRuleSpec:
        """The pure form the counting works with."""
        return GroupRuleSpec(id=self.pk, name=self.name, selector=self.selector,
                             match=self.match, measure=self.measure, limit=self.limit,
                             per=self.per, per_record=self.per_record, effect=self.effect,
                             revision=self.revision,
                             required_approvals=self.required_approvals,
                             across_owners=self.across_owners)


class GroupBreach(models.Model):
    """One window of a group rule over its limit: one escalation, a finding per agent."""

    rule = models.ForeignKey(GroupRule, on_delete=models.CASCADE, related_name="breaches")
    group_key = models.CharField(max_length=600)
    window = models.CharField(max_length=300)  # the dedupe window's id (its first member)
    opened_at = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    total = models.FloatField()
    agents = models.JSONField(default=list)  # names of the agents involved
    escalation = models.ForeignKey("reconciliation.Escalation", null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["rule", "group_key", "window"],
                                               name="one_breach_per_group_window")]
        indexes = [models.Index(fields=["rule", "group_key", "-opened_at"],
                                name="breach_rule_group")]

    def __str__(self) -> str:
        return f"{self.rule_id} {self.group_key} {self.window}"
