"""Group rules: compliance manages them (audited), ingest counts every event in the group
windows it falls in (in the same Redis pipeline as the per-agent windows, refilled from stored
events after Redis lost them), and a window over its limit becomes one breach: a finding on
each agent involved and one escalation."""

import hashlib
import json
import logging
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from rq import Queue

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.choices import AuditAction
from config import retries
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from config.prepared import prepared_cursor
from reconciliation.actions.escalations import open_escalation
from reconciliation.actions.findings import move_finding, open_finding
from reconciliation.agent_status import refresh_status
from reconciliation.choices import FindingStatus
from reconciliation.fleet_snapshot import request_refresh
from reconciliation.models import Finding
from registry.choices import Role
from registry.models import Agent
from registry.roles import has_role
from runtime import event_store, group_windows, windows
from runtime.events import Event
from runtime.group_rules import (
    AgentFacts,
    GroupCheck,
    GroupRuleSpec,
    block_reason,
    blocks,
    checks,
    describe,
    holds,
    validate,
    window_key,
)
from runtime.models import BehaviourEvent, GroupBreach, GroupRule

log = logging.getLogger(__name__)

EDITABLE = ("description", "selector", "match", "measure", "limit", "per", "per_record",
            "effect", "required_approvals", "across_owners", "enabled")
COUNTED = ("selector", "match", "measure", "limit", "per", "per_record")
REFILL_MAX_EVENTS = 50_000
BREACH_KIND = "group_limit_exceeded"
WARNING_KIND = "group_budget_warning"
# What a group rule reads of a stored event: its columns, then the same as Event's fields.
EVENT_COLUMNS = ("agent_id", "event_id", "ts", "kind", "tool", "resource", "record", "action",
                 "amount", "input_tokens", "output_tokens", "cost")
EVENT_FIELDS = ("id", *EVENT_COLUMNS[2:])


def stored_event(values: tuple) -> Any:
    """An Event from a row of EVENT_COLUMNS without its agent id."""
    return Event(agent="", **dict(zip(EVENT_FIELDS, values, strict=True)))


# --- compliance manages the rules --------------------------------------------------------------


def _check_role(actor: Any) -> None:
    if not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed("Only compliance staff manage group rules.")


def _validate(fields: dict[str, Any]) -> None:
    errors = validate(fields)
    if errors:
        raise Invalid(f"The group rule is not valid: {errors[0]['pointer']} "
                      f"{errors[0]['message']}.", details=errors)


@transaction.atomic
def create_group_rule(*, actor: Any, name: str, measure: str, limit: float, per: str,
                      selector: dict | None = None, match: dict | None = None,
                      per_record: bool = False, effect: str = "escalate", description: str = "",
                      required_approvals: int = 1, enabled: bool = True,
                      across_owners: bool = False) -> GroupRule:
    """Save a new group rule; it counts events from now on (and those stored in its window)."""
    _check_role(actor)
    if name == "what-if":  # the path of the what-if for an unsaved rule
        raise Invalid("A group rule cannot be named what-if.",
                      details=[{"pointer": "/name", "message": "reserved"}])
    fields = {"description": description, "selector": selector or {}, "match": match or {},
              "measure": measure, "limit": limit, "per": per, "per_record": per_record,
              "effect": effect, "required_approvals": required_approvals, "enabled": enabled,
              "across_owners": across_owners}
    _validate(fields)
    try:
        with transaction.atomic():
            rule = GroupRule.objects.create(name=name, created_by=actor, **fields)
    except IntegrityError:
        raise Conflict(f"A group rule named {name!r} exists.", code="exists") from None
    request_refresh()  # the fleet view lists group rules
    audit.record(actor=actor, action=AuditAction.GROUP_RULE_CREATED,
                 target=f"group_rule:{name}", after=rule.to_dict())
    return rule


@transaction.atomic
def update_group_rule(rule: GroupRule, *, actor: Any, **changes: Any) -> GroupRule:
    """Change a rule; a change to what it counts starts fresh windows (a new revision)."""
    _check_role(actor)
    rule = GroupRule.objects.select_for_update(no_key=True).filter(pk=rule.pk).first()
    if rule is None:
        raise NotFound("The group rule was deleted meanwhile.")
    before = rule.to_dict()
    fields = {name: changes.get(name, getattr(rule, name)) for name in EDITABLE}
    _validate(fields)
    if any(fields[name] != getattr(rule, name) for name in COUNTED):
        rule.revision += 1
    for name, value in fields.items():
        setattr(rule, name, value)
    rule.updated_at = timezone.now()
    rule.save()
    request_refresh()  # the fleet view lists group rules
    audit.record(actor=actor, action=AuditAction.GROUP_RULE_UPDATED,
                 target=f"group_rule:{rule.name}", before=before, after=rule.to_dict())
    return rule


@transaction.atomic
def delete_group_rule(rule: GroupRule, *, actor: Any) -> None:
    """Remove a rule (its breaches go with it; findings and escalations stay)."""
    _check_role(actor)
    before, name = rule.to_dict(), rule.name
    rule.delete()
    request_refresh()  # the fleet view lists group rules
    audit.record(actor=actor, action=AuditAction.GROUP_RULE_DELETED,
                 target=f"group_rule:{name}", before=before)


# --- counting ----------------------------------------------------------------------------------


def active_rules() -> list[GroupRuleSpec]:
    """The enabled rules, in their pure form (one query). On PostgreSQL one prepared
    statement, each rule's form kept per process as of its row (every ingest batch asks:
    the ORM compiled the query and built each rule's model and form again each time)."""
    if connection.vendor != "postgresql":
        return [rule.to_spec() for rule in GroupRule.objects.filter(enabled=True)]
    cursor = prepared_cursor()
    cursor.execute(_active_rules_statement())
    return [_spec_of(row) for row in cursor.fetchall()]


SPECS_KEPT = 1_000
SPEC_FIELDS = ("id", "name", "selector", "match", "measure", "limit", "per", "per_record",
               "effect", "revision", "required_approvals", "across_owners")
_specs: dict[tuple, GroupRuleSpec] = {}  # a rule's form as of its row


def _spec_of(row: tuple) -> GroupRuleSpec:
    spec = _specs.get(row)
    if spec is None:
        if len(_specs) >= SPECS_KEPT:
            _specs.clear()
        fields = dict(zip(SPEC_FIELDS, row, strict=True))
        fields["selector"], fields["match"] = (json.loads(fields["selector"]),
                                               json.loads(fields["match"]))
        spec = _specs[row] = GroupRuleSpec(**fields)
    return spec


@cache
def _active_rules_statement() -> str:
    """GroupRuleSpec's fields (the JSON columns as text: a row is then its own key), the
    rules in the ORM's order."""
    quote = connection.ops.quote_name
    columns = ", ".join(f"{quote(c)}::text" if c in ("selector", "match") else quote(c)
                        for c in SPEC_FIELDS)
    return (f"SELECT {columns} FROM {quote(GroupRule._meta.db_table)} WHERE enabled "
            "ORDER BY name")


def facts_of(agents: list[Agent], rules: list[GroupRuleSpec]) -> dict[int, AgentFacts]:
    """What the selectors look at, per agent (owners' names only when a rule asks)."""
    owners: dict[int, str] = {}
    if any("owner" in rule.selector for rule in rules):
        owners = dict(User.objects.filter(pk__in={a.owner_id for a in agents})
                      .values_list("pk", "username"))
    bounded = any(r.effect == "block" and r.measure == "amount" for r in rules)
    return {a.pk: AgentFacts(a.pk, a.name, owners.get(a.owner_id, ""), a.labels or {},
                             a.framework or (a.active_version.spec.get("framework", "")
                                             if a.active_version_id else ""),
                             _action_max(a) if bounded else {}, a.owner_id)
            for a in agents}


def _action_max(agent: Agent) -> dict[str, float]:
    """Each action's approved `max` (what one event of it may weigh in a block's window)."""
    if agent.active_version_id is None:
        return {}
    actions = agent.active_version.spec.get("actions") or {}
    return {name: float(rule["max"]) for name, rule in actions.items()
            if isinstance(rule, dict) and isinstance(rule.get("max"), int | float)}


def group_checks(events: list, agents: dict[str, Agent], rules: list[GroupRuleSpec]
                 ) -> list[tuple[Agent, Any, GroupCheck]]:
    """Every (agent, event, group window) the batch counts in."""
    if not rules:
        return []
    judged = {a.pk: a for a in agents.values() if a.active_version_id is not None}
    facts = facts_of(list(judged.values()), rules)
    found = []
    for event in events:
        agent = agents.get(event.agent)
        if agent is None or agent.pk not in judged:
            continue
        found.extend((agent, event, check) for check in checks(rules, facts[agent.pk], event))
    return found


def ensure_group_windows(rules: list[GroupRuleSpec], now: datetime) -> None:
    """Refill the windows of rules whose marker Redis no longer holds (restart, first use, a
    new revision) from stored events, as ensure_windows does per agent. Raises RedisError."""
    epoch, done = group_windows.filled([(r.id, r.revision) for r in rules])
    for rule, filled in zip(rules, done, strict=True):
        if not filled:
            _refill(rule, now, epoch)


def _refill(rule: GroupRuleSpec, now: datetime, epoch: str) -> None:
    agents = list(Agent.objects.filter(active_version__isnull=False)
                  .select_related("active_version"))
    facts = facts_of(agents, [rule])
    rows = (BehaviourEvent.objects.filter(agent__in=[a.pk for a in agents], foreign=False,
                                          ts__gte=now - timedelta(seconds=rule.seconds))
            .order_by("-ts").values_list(*EVENT_COLUMNS)[:REFILL_MAX_EVENTS])
    fill = []
    for agent_id, *values in rows:
        event = stored_event(values)
        fill.extend((check, event.ts) for check in checks([rule], facts[agent_id], event))
    if fill:
        group_windows.fill(fill, now)
    group_windows.mark_filled(rule.id, rule.revision, rule.seconds, epoch)


def over_limit(found: list[tuple[Agent, Any, GroupCheck]],
               replies: list[tuple[float, list[int]]]) -> list[dict[str, Any]]:
    """The breaches a batch's counts show, one per rule window: its peak total, every agent
    involved, the first event over the limit."""
    by_window: dict[str, dict[str, Any]] = {}
    for (agent, event, check), (total, agent_ids) in zip(found, replies, strict=True):
        if total <= check.reported_above:
            continue
        warning = total <= check.limit  # a group budget at 80% or more, not over it
        name = f"{'warning:' if warning else ''}{check.key}"
        hit = by_window.setdefault(name, {
            "rule_id": check.rule_id, "key": name, "group_key": check.group_key,
            "seconds": check.seconds, "total": total, "agents": [], "event_id": event.id,
            "trigger_agent": agent.pk, "warning": warning})
        hit["total"] = max(hit["total"], total)
        hit["agents"] = sorted(set(hit["agents"]) | set(agent_ids))
    return list(by_window.values())


def queue_breaches(hits: list[dict[str, Any]], held: list[tuple[int, int]]) -> int:
    """Name each breach's dedupe window and hand it to the ingest workers (after commit;
    raises RedisError so the events stay uncounted), each job saying which outbox rows
    (`held`) it answers for; returns how many jobs."""
    if not hits:
        return 0
    names = windows.window_ids([(f"group:{h['key']}", f"{h['trigger_agent']}|{h['event_id']}",
                                 h["seconds"]) for h in hits])
    retry = retries.ingest_job()
    return len(windows.ingest_queue().enqueue_many([  # one round trip for the batch's breaches
        Queue.prepare_data("runtime.jobs.record_group_breach", ({**hit, "window": window},),
                           {"held": held} if held else None, retry=retry)
        for hit, window in zip(hits, names, strict=True)]))


# --- a breach: a finding per agent, one escalation ---------------------------------------------


# A group rule's finding points at the rule (its name is its identity: never changed).
RULE_POINTER = "/group-rules/"


def _fingerprint(rule: GroupRule, breach: GroupBreach) -> str:
    return hashlib.sha256(f"group|{rule.pk}|{breach.pk}".encode()).hexdigest()


def record_group_breach(hit: dict[str, Any],
                        held: list[tuple[int, int]] | None = None) -> GroupBreach | None:
    """A group window over its limit: the breach (once per window, whichever process or job
    saw it), a finding on each agent involved not yet holding one, and one escalation; for a
    block rule, a job that blocks each agent whose finding of the breach is still open (the
    new ones, and those a lost block job left open), which the outbox rows of the batches it
    came from (`held`) wait for."""
    now = timezone.now()
    with transaction.atomic():
        # One breach job per rule at a time: two web processes' hits of one window meet here.
        rule = GroupRule.objects.select_for_update(no_key=True).filter(pk=hit["rule_id"]).first()
        if rule is None or not rule.enabled:
            return None
        spec = rule.to_spec()
        warning = bool(hit.get("warning"))
        if warning:  # its own row, so the breach over the limit later is still one escalation
            hit = {**hit, "group_key": f"warning|{hit['group_key']}"}
        agents = {a.pk: a for a in Agent.objects.filter(pk__in=hit["agents"])}
        names = sorted(a.name for a in agents.values())
        breach = (GroupBreach.objects.filter(rule=rule, group_key=hit["group_key"],
                                             window=hit["window"]).first()
                  or GroupBreach.objects.filter(  # Redis lost the window's name
                      rule=rule, group_key=hit["group_key"],
                      opened_at__gt=now - timedelta(seconds=hit["seconds"]))
                  .order_by("-opened_at").first())
        created = breach is None
        if created:
            breach = GroupBreach.objects.create(rule=rule, group_key=hit["group_key"],
                                                window=hit["window"], opened_at=now,
                                                last_seen=now, total=hit["total"],
                                                agents=names)
            audit.record(actor=SYSTEM, action=AuditAction.GROUP_RULE_BREACHED,
                         target=f"group_rule:{rule.name}",
                         after={"group": hit["group_key"], "total": hit["total"],
                                "limit": rule.limit, "agents": names,
                                "event": hit["event_id"]},
                         reason=describe(spec, hit["group_key"].removeprefix("warning|"),
                                         hit["total"]))
        else:
            breach.total = max(breach.total, hit["total"])
            breach.agents = sorted(set(breach.agents) | set(names))
            breach.last_seen = now
            breach.save(update_fields=["total", "agents", "last_seen"])
        reason = describe(spec, hit["group_key"].removeprefix("warning|"), breach.total)
        if warning:
            reason = f"{reason.replace(', above ', ', 80% or more of ')} (a warning)"
        opened = []
        trigger = agents.get(hit["trigger_agent"]) or next(iter(agents.values()), None)
        for agent in sorted(agents.values(), key=lambda a: a.pk != getattr(trigger, "pk", 0)):
            finding = _finding(rule, breach, agent, reason, now,
                               WARNING_KIND if warning else BREACH_KIND)
            if finding is not None:
                opened.append((agent, finding))
        if created and rule.effect == "escalate" and opened and not warning:
            agent, finding = opened[0]
            breach.escalation = open_escalation(
                agent, finding, reason=f"{reason} (agents involved: {', '.join(names)})")
            breach.save(update_fields=["escalation"])
            opened = opened[1:]
        if rule.effect == "block" and not warning:
            waiting = sorted(Finding.objects.filter(
                agent_id__in=list(agents), fingerprint=_fingerprint(rule, breach),
                status=FindingStatus.OPEN).values_list("pk", flat=True))
            if waiting:
                _block_on_commit(breach.pk, waiting, held or [])
            opened = []
        for member, finding in opened:
            note = (f"{reason}; escalated once as escalation #{breach.escalation_id}"
                    if breach.escalation_id else f"{reason}; recorded" if warning
                    else f"{reason}; recorded (group rule effect {rule.effect})")
            move_finding(finding, FindingStatus.LOGGED, reason=note, agent=member)
        for agent in agents.values():
            refresh_status(agent, now=now)
    return breach


def _block_on_commit(breach_id: int, finding_ids: list[int], held: list[tuple[int, int]]
                     ) -> None:
    """Block the agents of a block rule's breach once it committed (their connectors are
    outside the database; the job retries, each suspension is idempotent by its key). The
    outbox rows the breach came from (`held`) wait for the job too."""
    def enqueue() -> None:
        event_store.jobs_added(held)
        windows.ingest_queue().enqueue(
            "runtime.jobs.block_group_job", breach_id, finding_ids, held=held,
            retry=retries.ingest_job())

    transaction.on_commit(enqueue, robust=True)


def _finding(rule: GroupRule, breach: GroupBreach, agent: Agent, reason: str,
             now: datetime, kind: str = "group_limit_exceeded") -> Finding | None:
    """The agent's finding of the breach, created (audited, alerted) once; None when it had
    one already (its count is brought up to date)."""
    fingerprint = _fingerprint(rule, breach)
    if Finding.objects.filter(agent=agent, fingerprint=fingerprint).update(
            last_seen=now, actual=breach.total):
        return None
    return open_finding(
        agent, why=reason, after={"group_rule": rule.name, "group": breach.group_key},
        alert_fields={"message": reason}, fingerprint=fingerprint, kind=kind,
        pointer=f"{RULE_POINTER}{rule.name}", expected=rule.limit, actual=breach.total,
        severity="high", area="behaviour", generation=agent.generation, behaviour=True,
        reason=reason, first_seen=now, detected_at=now, last_seen=now, observed_at=now)


# --- decisions: sign-offs a group rule asks for ------------------------------------------------


def decision_block(agent: Agent, now: datetime) -> str | None:
    """Why a block rule denies this agent's decisions now (its group's window is over the
    limit), or None. Raises RedisError (the caller fails closed)."""
    rules = [r for r in active_rules() if r.effect == "block"]
    if not rules:
        return None
    facts = facts_of([agent], rules)[agent.pk]
    rules = [r for r in rules if blocks(r, facts, float("inf"))]  # those covering the agent
    if not rules:
        return None
    ensure_group_windows(rules, now)
    for rule in rules:
        total, agent_ids = group_windows.peek_window(window_key(rule, "all"), rule.seconds,
                                                     rule.measure, now)
        if not blocks(rule, facts, total):
            continue
        # the owners whose agents filled the window: a block stays inside them unless
        # compliance chose this rule to reach across owners
        owners = set(Agent.objects.filter(pk__in=agent_ids).values_list("owner_id", flat=True))
        if blocks(rule, facts, total, owners):
            return block_reason(rule, total)
    return None


def decision_hold(agent: Agent, request: dict[str, Any], now: datetime
                  ) -> tuple[str, int] | None:
    """(why, approvers needed) when a group rule holds this decision request for sign-offs:
    the action would take the group's window over the limit. Raises RedisError."""
    rules = [r for r in active_rules() if r.required_approvals > 1]
    if not rules:
        return None
    ensure_group_windows(rules, now)
    facts = facts_of([agent], rules)[agent.pk]
    held = []
    for rule in rules:
        key = window_key(rule, "all")
        total = group_windows.peek_total(key, rule.seconds, rule.measure, now)
        if holds(rule, facts, request, total):
            held.append((rule, total))
    if not held:
        return None
    rule, total = max(held, key=lambda pair: pair[0].required_approvals)
    return (f"group rule {rule.name}: {_money(total)} already in the last {rule.per} across "
            f"the group; this would go above {_money(rule.limit)}: "
            f"{rule.required_approvals} approvers must sign off", rule.required_approvals)


def _money(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
