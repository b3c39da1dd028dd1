"""What agents do, as the runtime keeps it: behaviour events and the outbox of batches not yet
counted, agents seen only in traffic, runtime decisions, and rules over groups of agents with
the windows they found over their limit.

The tables were made by the reconciliation app and keep its names (`db_table`): the events'
table is partitioned by day on PostgreSQL (reconciliation/partitions.py), and moving the
models changed no table, index or constraint."""

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from reconciliation.choices import DecisionOutcome, DecisionStatus, WebhookStatus
from registry.models import Agent, ComplianceRule
from runtime.group_rules import EFFECTS, MEASURES, GroupRuleSpec


class BehaviourEvent(models.Model):
    """One thing an agent did (tool call, data access, action), as reported; idempotent on
    (agent, id)."""

    event_id = models.CharField(max_length=128)
    # The references out of this table (agent, sender_user, sender_token) have no database
    # constraint: each would be a deferred check per stored event at commit, as costly as the
    # insert itself at ingest's rate. Nothing deletes agents, people or tokens outside Django,
    # which still cascades and nulls them (on_delete is Django's). event_agent_ts serves the
    # agent's lookups, so the agent column has no index of its own.
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="events", db_constraint=False, db_index=False)
    agent_name = models.CharField(max_length=63)  # kept for agents the registry does not know
    ts = models.DateTimeField()
    kind = models.CharField(max_length=16)
    tool = models.CharField(max_length=128, blank=True, default="")
    resource = models.CharField(max_length=256, blank=True, default="")
    record = models.CharField(max_length=256, blank=True, default="")
    action = models.CharField(max_length=128, blank=True, default="")
    amount = models.FloatField(null=True, blank=True)
    approved_by = models.CharField(max_length=150, blank=True, default="")
    decision_id = models.CharField(max_length=64, blank=True, default="")
    trace_id = models.CharField(max_length=64, blank=True, default="")
    span_id = models.CharField(max_length=32, blank=True, default="")
    source = models.CharField(max_length=8, default="api")  # api | otlp
    # GenAI usage (OpenTelemetry gen_ai.* or sent as fields): what feeds token and cost rules.
    model = models.CharField(max_length=128, blank=True, default="")
    operation = models.CharField(max_length=32, blank=True, default="")
    error = models.CharField(max_length=128, blank=True, default="")
    input_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    output_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    cost = models.FloatField(null=True, blank=True)
    attributes = models.JSONField(null=True, blank=True)  # what no field maps, as sent
    received_at = models.DateTimeField(default=timezone.now)
    # Who sent it: the audit label of the principal, and the person or token behind it.
    sender = models.CharField(max_length=160, blank=True, default="")
    # Not indexed: nothing looks events up by sender but within one agent's (event_agent_ts),
    # and people and tokens are never deleted (revoked, deactivated), so nulling a sender
    # (a scan) does not happen in the product; an index each was a write per stored event.
    sender_user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+",
                                    db_constraint=False, db_index=False)
    sender_token = models.ForeignKey("registry.ApiToken", null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="+",
                                     db_constraint=False, db_index=False)
    # Sent under the name before it was registered by someone who turned out not to be its
    # owner (nor an admin): kept and shown, never counted toward the agent's rules.
    foreign = models.BooleanField(default=False)

    class Meta:
        db_table = "reconciliation_behaviourevent"  # its name from before the move
        # Ids are the sender's: two agents may use one id. Foreign events do not reserve an id,
        # so nobody can pre-send an agent's ids to have its own events dropped as repeats.
        # An event is stored only with its key (EventKey, whose primary key is the agent and
        # the id), so no unique index here: the table is partitioned by day of `ts`, and one
        # would have had to hold `ts` too (a resend under another time went past it).
        # By name only the events of agents the registry does not know (agent null: shadow
        # agents', read when one is registered); a registered agent's are read by agent, so
        # its events cost ingest one index write fewer each (bench/RESULTS.md, tenth session).
        indexes = [models.Index(fields=["agent", "ts"], name="event_agent_ts"),
                   models.Index(fields=["agent_name", "ts"], name="event_name_ts",
                                condition=models.Q(agent__isnull=True))]

    def __str__(self) -> str:
        return f"{self.agent_name} {self.kind} {self.event_id}"


class EventKey(models.Model):
    """The (agent name, event id) of every stored event that is not foreign: what ingest's
    repeat check looks up, and what makes two batches racing with one event store it once
    (its primary key). One plain table, not partitioned: the events' table is partitioned by
    day of `ts`, so an id looked up there is a probe into every day partition, and a resend
    may carry another ts than the event it repeats. `ts` is the stored event's, so a key goes
    with its event's day (retention: runtime/retention.py)."""

    pk = models.CompositePrimaryKey("agent_name", "event_id")
    agent_name = models.CharField(max_length=63)
    event_id = models.CharField(max_length=128)
    ts = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["ts"], name="event_key_ts")]

    def __str__(self) -> str:
        return f"{self.agent_name} {self.event_id}"


class UncountedBatch(models.Model):
    """The event outbox: one row per ingested batch, written in the batch's transaction. Once
    its events are counted in their Redis windows (after commit) it goes, unless they broke
    rules: then it stays until the jobs that record those rules have run (`jobs`), since a
    Redis that fails over or restarts from disk can lose jobs it had just taken. A row left
    behind (Redis down, a process died, jobs lost) is drained by recount_events. One row per
    batch, not a flag per event: flagging each event was an UPDATE of every stored row, which
    rewrote each row's index entries."""

    received_at = models.DateTimeField()
    # The stored events' row ids, and their earliest and latest ts (the partition key, so
    # reading them back looks only at the days they are in).
    events = models.JSONField()
    first_ts = models.DateTimeField()
    last_ts = models.DateTimeField()
    # When its events were counted and their broken rules queued (null: not counted yet),
    # how many of those jobs have not finished (below zero for a moment when a job finishes
    # before its batch says how many it queued), and which counting of the batch they belong
    # to (recount_events counts a batch again when its jobs are overdue: a job of an earlier
    # counting no longer answers for the row). Database defaults: ingest's store statement
    # writes the row in SQL.
    queued_at = models.DateTimeField(null=True, blank=True)
    jobs = models.IntegerField(default=0, db_default=0)
    attempt = models.IntegerField(default=0, db_default=0)

    class Meta:
        db_table = "reconciliation_uncountedbatch"  # its name from before the move

    def __str__(self) -> str:
        return f"{len(self.events)} events received {self.received_at:%Y-%m-%d %H:%M:%S}"


class UnregisteredAgent(models.Model):
    """A shadow agent: something reported under a name the registry does not know."""

    name = models.CharField(max_length=63, unique=True)
    # The name as the agent or its telemetry spelled it ("Math Tutor" for math-tutor).
    display_name = models.CharField(max_length=256, blank=True, default="")
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    events = models.PositiveIntegerField(default=0)
    last_observation = models.JSONField(null=True, blank=True)
    assigned_owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                       on_delete=models.PROTECT, related_name="+")
    registered = models.BooleanField(default=False)

    class Meta:
        db_table = "reconciliation_unregisteredagent"  # its name from before the move

    def __str__(self) -> str:
        return f"unregistered {self.name}"


class Decision(models.Model):
    """A runtime decision an agent asked for before a sensitive action."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="decisions")
    request = models.JSONField()  # {action, amount, tool, resource, record}
    request_sha256 = models.CharField(max_length=64)
    outcome = models.CharField(max_length=8, choices=DecisionOutcome.choices)
    status = models.CharField(max_length=10, choices=DecisionStatus.choices)
    rule = models.TextField()
    callback_url = models.URLField(max_length=500, blank=True, default="")
    generation = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    # The person behind the request (who holds the agent token that asked, or who asked):
    # four eyes keeps them from answering it.
    asked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                 on_delete=models.PROTECT, related_name="+")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.PROTECT, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    comment = models.TextField(blank=True, default="")
    used_at = models.DateTimeField(null=True, blank=True)
    used_by_event = models.CharField(max_length=128, blank=True, default="")
    # A group rule may ask for more than one sign-off: the approvers who allowed it so far.
    required_approvals = models.PositiveSmallIntegerField(default=1)
    approvals = models.JSONField(default=list, blank=True)
    # The POST of the answer to `callback_url` (runtime/actions/webhooks.py): its status, how
    # many attempts were taken, when the one waiting is overdue (a sweep sends it again: Redis
    # can lose its job) and why the last failed. Database defaults: the previous release's
    # code inserts decisions during a rolling upgrade.
    webhook_status = models.CharField(max_length=12, choices=WebhookStatus.choices, blank=True,
                                      default=WebhookStatus.NONE, db_default=WebhookStatus.NONE)
    webhook_attempts = models.PositiveSmallIntegerField(default=0, db_default=0)
    webhook_due_at = models.DateTimeField(null=True, blank=True)
    webhook_error = models.CharField(max_length=300, blank=True, default="", db_default="")

    class Meta:
        db_table = "reconciliation_decision"  # its name from before the move
        indexes = [models.Index(fields=["status", "expires_at"], name="decision_pending"),
                   models.Index(fields=["webhook_due_at"], name="decision_webhook_due",
                                condition=models.Q(webhook_status=WebhookStatus.PENDING))]

    def __str__(self) -> str:
        return f"decision {self.pk} {self.outcome}/{self.status}"

    def to_dict(self) -> dict[str, Any]:
        """The API form of a decision."""
        return {"id": str(self.pk), "agent": self.agent.name, "request": self.request,
                "outcome": self.outcome, "status": self.status, "rule": self.rule,
                "expires_at": self.expires_at.isoformat() if self.expires_at else None,
                "decided_by": self.decided_by.username if self.decided_by_id else None,
                "decided_at": self.decided_at.isoformat() if self.decided_at else None,
                "comment": self.comment,
                **({"required_approvals": self.required_approvals,
                    "approvals": self.approvals} if self.required_approvals > 1 else {})}

    def webhook(self) -> dict[str, Any] | None:
        """Where the POST of a human's answer (or the expiry) to `callback_url` stands, for
        the agent and its owner reading the decision (not part of the POST itself). None
        without a webhook to send: no callback_url, or answered at once (the answer was the
        request's response)."""
        if not self.callback_url:
            return None
        if self.status == DecisionStatus.PENDING:
            return {"status": "waiting_for_answer", "attempts": 0, "error": ""}
        if not self.webhook_status:
            return None
        return {"status": self.webhook_status, "attempts": self.webhook_attempts,
                "error": self.webhook_error}


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

    class Meta(ComplianceRule.Meta):
        db_table = "reconciliation_grouprule"  # its name from before the move

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
        db_table = "reconciliation_groupbreach"  # its name from before the move
        constraints = [models.UniqueConstraint(fields=["rule", "group_key", "window"],
                                               name="one_breach_per_group_window")]
        indexes = [models.Index(fields=["rule", "group_key", "-opened_at"],
                                name="breach_rule_group")]

    def __str__(self) -> str:
        return f"{self.rule_id} {self.group_key} {self.window}"
