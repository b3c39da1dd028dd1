"""Behaviour in: ingesting events (idempotent on the agent and id, in bulk, each with who sent
it), counting them in sliding windows, and turning broken rules into findings that go through
the enforcement path."""

import hashlib
import json
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery, TextField, Window
from django.db.models.functions import Cast, RowNumber
from django.utils import timezone
from rq import Queue

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.choices import AuditAction
from config import retries
from config.errors import Invalid, NotAllowed, NotFound
from config.prepared import prepared_cursor
from config.times import parse_timestamp
from config.unicode_text import is_text
from reconciliation.actions.common import audit_label, enforcement_held, suspend_agent
from reconciliation.actions.escalations import open_escalation
from reconciliation.actions.findings import move_finding, open_finding
from reconciliation.agent_status import refresh_status
from reconciliation.choices import DecisionStatus, FindingStatus, Trigger
from reconciliation.connectors import connector_for
from reconciliation.controller.triggers import request_reconcile
from reconciliation.models import Finding, ObservedState
from reconciliation.reconciler.diff import Operation, OperationKind, effective_desired
from reconciliation.reconciler.plan import idempotency_key, mode_for
from registry.actions.waivers import active_waivers
from registry.choices import Lifecycle, Role
from registry.manifest import duration_seconds
from registry.models import Agent, DesiredStateVersion
from registry.principals import AgentPrincipal
from registry.roles import has_role
from registry.waivers import is_waived
from runtime import event_store, group_windows, windows
from runtime.actions import group_rules
from runtime.behaviour import (
    DEDUPE_SECONDS,
    Violation,
    WindowCheck,
    callable_tools,
    covers,
    granted_resources,
    may_break_a_static_rule,
    static_violations,
    window_checks,
    window_violation,
)
from runtime.budgets import WARNING_AREA, budget_checks, budget_violation
from runtime.events import Event, validate_event
from runtime.models import BehaviourEvent, Decision, EventKey, UncountedBatch, UnregisteredAgent

log = logging.getLogger(__name__)


@dataclass
class IngestReport:
    """Per-event results of a batch."""

    results: list[dict[str, Any]] = field(default_factory=list)
    rules_pending: bool = False

    def add(self, event_id: Any, status: str, reason: str = "") -> None:
        row = {"id": event_id if isinstance(event_id, str) and is_text(event_id) else None,
               "status": status}
        if reason:
            row["reason"] = reason
        self.results.append(row)

    def to_dict(self) -> dict[str, Any]:
        counts = Counter(r["status"] for r in self.results)
        body = {"accepted": counts["accepted"], "duplicates": counts["duplicate"],
                "rejected": counts["rejected"], "results": self.results}
        if self.rules_pending:
            body["rules"] = "pending: the work queue is down; stored events are checked later"
        return body


def _may_report(actor: Any, name: str, agent: Agent | None) -> str:
    """'' when the principal may report events for `name`, else why not."""
    if isinstance(actor, AgentPrincipal):
        return "" if actor.agent.name == name else "an agent token sends its own events only"
    if has_role(actor, Role.ADMIN):
        return ""
    if has_role(actor, Role.OWNER) and (agent is None or agent.owner_id == actor.pk):
        return ""
    return f"you may not report events for {name}"


def _signed_off(event: Event, decisions: dict[str, Decision], used: set[str]) -> tuple[bool, bool]:
    """(signed off, reused): a human-approved decision of this agent, for this action and at
    least this amount, not used before (single use)."""
    decision = decisions.get(event.decision_id) if event.decision_id else None
    if decision is None or decision.agent.name != event.agent:
        return False, False
    if not covers(decision.request, event):
        return False, False
    if decision.status == DecisionStatus.USED or decision.pk.hex in used:
        return False, True
    if decision.status == DecisionStatus.APPROVED:
        used.add(decision.pk.hex)
        return True, False
    return False, False


def _sender(actor: Any, token: Any) -> dict[str, Any]:
    """The sender columns of an event: who sent it, and the person or token behind it."""
    if isinstance(actor, AgentPrincipal):
        return {"sender": actor.audit_label, "sender_user_id": None,
                "sender_token_id": getattr(actor.token, "pk", None)}
    label = audit_label(actor)
    if token is not None:
        label = f"{label} ({token.audit_label})"
    return {"sender": label[:160], "sender_user_id": getattr(actor, "pk", None),
            "sender_token_id": getattr(token, "pk", None)}


def ingest_events(items: list[Any], *, actor: Any, token: Any = None, source: str = "api",
                  now: datetime | None = None) -> IngestReport:
    """Store a batch of events (each accepted, duplicate or rejected on its own) with who sent
    them, count them in their windows, and queue broken rules for the ingest workers. `items`
    are the events as sent (JSON values, validated here as of `now`) or as
    runtime.typed_batch.read_batch took them (Events, validated as of the same `now`). An id is
    a repeat only for the same agent: two agents may use the same id. The batch costs the
    same few statements however many agents and events it names: one read of the agents, one
    statement that stores what is not a repeat with its outbox row and reports the repeats,
    and after commit the Redis scripts and the outbox row's delete."""
    now = now or timezone.now()
    report = IngestReport()
    valid: list[Event] = []
    accepted: list[dict[str, Any]] = []  # the report's row of each valid event
    seen: set[tuple[str, str]] = set()
    parsed = [item if type(item) is Event else validate_event(item, now) for item in items]
    names = {e.agent for e in parsed if isinstance(e, Event)}
    agents = _batch_agents(names)
    refusals = {name: _may_report(actor, name, agents.get(name)) for name in names}
    for item, event in zip(items, parsed, strict=True):
        if isinstance(event, str):
            report.add(item.get("id") if isinstance(item, dict) else None, "rejected", event)
        elif refusal := refusals[event.agent]:
            report.add(event.id, "rejected", refusal)
        elif (event.agent, event.id) in seen:
            report.add(event.id, "duplicate")
        else:
            seen.add((event.agent, event.id))
            valid.append(event)
            row = {"id": event.id, "status": "accepted"}  # an Event's id is text already
            report.results.append(row)
            accepted.append(row)
    if isinstance(actor, AgentPrincipal) and not valid and any(
            r.get("reason", "").startswith("an agent token") for r in report.results):
        raise NotAllowed("An agent token sends its own agent's events only.")
    with transaction.atomic():
        # The outbox: the batch's row (written with its events) goes only once its events
        # are in their windows and their broken rules queued, so a process that dies after
        # commit loses no check.
        repeats, held = event_store.insert_new(
            valid, {name: agent.id for name, agent in agents.items()},
            {"source": source, "received_at": now, "foreign": False, **_sender(actor, token)})
        fresh = valid
        if repeats:
            fresh = []
            for event, row in zip(valid, accepted, strict=True):
                if (event.agent, event.id) in repeats:
                    row["status"] = "duplicate"
                else:
                    fresh.append(event)
        violations = _static(fresh, agents, _use_decisions(fresh, now), now)
        unregistered = [e for e in fresh if e.agent not in agents]
        if unregistered:
            event_store.note_unregistered(Counter(e.agent for e in unregistered),
                                          {e.agent: e.label for e in unregistered if e.label},
                                          now)
        if fresh:
            transaction.on_commit(
                lambda: _count_stored(fresh, agents, violations, now, report, held),
                robust=True)
    return report


# What the rules read of an agent and its approved version (the spec comes from _version_specs).
# Its JSON columns are read as text: a row is then its own cache key, and only an agent not
# kept yet has them decoded.
AGENT_COLUMNS = ("id", "name", "owner_id", "labels_text", "framework", "lifecycle",
                 "generation", "restricted_text", "active_version_id",
                 "active_version__spec_sha256")
AGENTS_KEPT = 100_000
_agents: dict[tuple, Agent] = {}  # an agent as of its row (AGENT_COLUMNS), per process
VERSION_SPECS_KEPT = 20_000
_version_specs: dict[int, tuple[str, dict[str, Any]]] = {}


def _batch_agents(names: set[str]) -> dict[str, Agent]:
    """The batch's agents in one query of the columns the rules need, whatever their number.
    The process keeps each agent as of that row and each version's spec (a version's spec
    never changes: a new one is a new version with its own hash); a new version, a grant's
    start, a restriction, a suspension or a new generation changes the row read here, so the
    next batch sees each of them. A retired agent's traffic is flagged as an unregistered
    agent's."""
    if not names:
        return {}
    rows = _agent_rows(names)
    missing = {row[8] for row in rows if row[8] is not None and (
        _version_specs.get(row[8], ("",))[0] != row[9])}
    if missing:
        if len(_version_specs) + len(missing) > VERSION_SPECS_KEPT:
            _version_specs.clear()
        _version_specs.update(
            (pk, (sha, spec)) for pk, sha, spec in DesiredStateVersion.objects.filter(
                pk__in=missing).values_list("pk", "spec_sha256", "spec"))
    if len(_agents) + len(rows) > AGENTS_KEPT:
        _agents.clear()
    found = {}
    for row in rows:
        agent = _agents.get(row)
        if agent is None:
            agent = _agents[row] = _agent_of(row)
        found[agent.name] = agent
    return found


def _agent_rows(names: set[str]) -> list[tuple]:
    """The AGENT_COLUMNS rows of the named agents not retired. On PostgreSQL one prepared
    statement with the names as one array (planned once per session: the ORM's IN list of a
    thousand names was compiled and planned again for every batch), sent as one text the
    server splits (names are slugs, never holding a comma: psycopg formats a list in Python,
    an element at a time). The names are a relation joined to the agents, and "retired" is
    in the statement's text: after a few runs PostgreSQL keeps one plan for every value, and
    with the names in a filter and the lifecycle a parameter, that plan could scan every
    agent splitting the whole list again for each (~50 ms a 1,000-agent batch)."""
    if connection.vendor != "postgresql":
        return list(Agent.objects.filter(name__in=names).exclude(lifecycle=Lifecycle.RETIRED)
                    .annotate(labels_text=Cast("labels", TextField()),
                              restricted_text=Cast("restricted_to", TextField()))
                    .values_list(*AGENT_COLUMNS))
    cursor = prepared_cursor()
    text = ",".join(names)
    if text.count(",") != len(names) - 1:  # a name no registry holds: not split into two
        raise ValueError("an agent name holds a comma")
    cursor.execute(AGENT_ROWS, [text])
    return cursor.fetchall()


# AGENT_COLUMNS in one statement (the agent's JSON columns as text, as the ORM casts them).
AGENT_ROWS = (
    "SELECT a.id, a.name, a.owner_id, a.labels::text, a.framework, a.lifecycle, a.generation, "
    "a.restricted_to::text, a.active_version_id, v.spec_sha256 "
    "FROM unnest(string_to_array(%s, ',')) AS n(name) "
    f"JOIN {Agent._meta.db_table} a ON a.name = n.name "
    f"LEFT JOIN {DesiredStateVersion._meta.db_table} v ON v.id = a.active_version_id "
    f"WHERE a.lifecycle <> '{Lifecycle.RETIRED.value}'")


def _agent_of(row: tuple) -> Agent:
    """An agent (and its approved version) built from its AGENT_COLUMNS row, read only."""
    pk, name, owner_id, labels, framework, lifecycle, generation, restricted, version_id, sha = row
    agent = Agent(id=pk, name=name, owner_id=owner_id, labels=json.loads(labels),
                  framework=framework, lifecycle=lifecycle, generation=generation,
                  restricted_to=None if restricted is None else json.loads(restricted))
    if version_id is not None:
        agent.active_version = DesiredStateVersion(
            id=version_id, agent_id=pk, spec_sha256=sha, spec=_version_specs[version_id][1])
    agent.__dict__["_ingest_facts"] = _facts_of(agent)
    return agent


def _use_decisions(fresh: list[Event], now: datetime) -> dict[tuple[str, str], tuple[bool, bool]]:
    """Per (agent, id) of an event naming a decision: (signed off, reused). A human-approved
    decision signs off the first event it covers and is used up by it (single use)."""
    decision_ids = {e.decision_id for e in fresh if e.decision_id}
    if not decision_ids:
        return {}
    decisions = {d.pk.hex: d for d in Decision.objects.select_for_update(no_key=True, of=("self",))
                 .select_related("agent").filter(pk__in=_uuids(decision_ids))}
    decisions.update({str(d.pk): d for d in decisions.values()})
    used: set[str] = set()
    signed = {(e.agent, e.id): _signed_off(e, decisions, used)
              for e in fresh if e.decision_id}
    for decision in decisions.values():
        if decision.pk.hex in used and decision.status == DecisionStatus.APPROVED:
            event_id = next(e.id for e in fresh if e.decision_id in (
                decision.pk.hex, str(decision.pk)))
            Decision.objects.filter(pk=decision.pk).update(
                status=DecisionStatus.USED, used_at=now, used_by_event=event_id)
            decision.status = DecisionStatus.USED  # its str(pk) alias is the same object
    return signed


def _count_stored(events: list[Event], agents: dict[str, Agent],
                  violations: dict[int, list[Violation]], now: datetime,
                  report: IngestReport | None = None, held: int | None = None) -> bool:
    """After commit: count stored events in their windows, queue the rules they broke, and
    only then release their outbox row (`held`: it goes, or waits for the jobs queued). When
    Redis fails the row stays for recount_events."""
    batch = [(held, 0)] if held is not None else []
    try:
        breaches = _count_windows(events, agents, violations, now)
        jobs = _queue_violations(violations, batch)
        jobs += group_rules.queue_breaches(breaches, batch)
    except redis.RedisError as error:
        log.warning("Redis unavailable, %d events wait for their rules: %s", len(events), error)
        if report is not None:
            report.rules_pending = True
        return False
    if held is not None:
        event_store.release_counted(held, jobs)
    return True


def _static(events: list[Event], agents: dict[str, Agent],
            signed: dict[tuple[str, str], tuple[bool, bool]],
            now: datetime) -> dict[int, list[Violation]]:
    """What each event breaks on its own, per agent (effective desired state once each)."""
    violations: dict[int, list[Violation]] = {}
    # Per agent once (not per event): its spec and the sets each event is checked against.
    judged: dict[str, tuple | None] = {}
    suspended_since: dict[int, datetime | None] = {}
    for event in events:
        rules = judged.get(event.agent, False)
        if rules is False:
            agent = agents.get(event.agent)
            rules = judged[event.agent] = None if agent is None or (
                _facts(agent).version is None) else (agent.id, *_rules(agent, now))
            if rules is not None:
                violations.setdefault(rules[0], [])
        if rules is None:
            continue
        agent_id, spec, tools, granted = rules
        if may_break_a_static_rule(event, tools, granted):
            signed_off, reused = signed.get((event.agent, event.id), (False, False))
            if found := static_violations(spec, event, signed_off=signed_off,
                                          reused_decision=reused, tools=tools,
                                          granted=granted):
                violations[agent_id].extend(found)
        if spec.get("running") is False and (
                ran := _ran_while_suspended(event, agent_id, suspended_since)):
            violations[agent_id].append(ran)
    return violations


def _ran_while_suspended(event: Event, agent_id: int,
                         suspended_since: dict[int, datetime | None]) -> Violation | None:
    """A tool call or action an agent made after its suspension committed (one its gate let
    through while the suspension was on its way): what it did cannot be undone, so it is a
    finding. Judged by the event's own time against the suspension's (`updated_at`, which the
    suspension set); an event from before the suspension, sent late, is not one."""
    if event.kind not in ("tool_call", "action"):
        return None
    if agent_id not in suspended_since:
        suspended_since[agent_id] = Agent.objects.filter(
            pk=agent_id, lifecycle=Lifecycle.SUSPENDED).values_list("updated_at",
                                                                   flat=True).first()
    since = suspended_since[agent_id]
    if since is None or event.ts <= since:
        return None
    what = event.action or event.tool
    return Violation("ran_while_suspended", "/running", False, True, "behaviour", event.id,
                     f"{what} ran after the agent was suspended "
                     f"({since:%Y-%m-%d %H:%M:%S} UTC)")


RULE_SPECS_KEPT = 20_000
_rule_specs: dict[tuple, tuple[dict[str, Any], datetime, datetime | None, set[str], set[str]]] = {}


def _rules_spec(agent: Agent, now: datetime) -> dict[str, Any]:
    """The spec an agent's events are judged by now (see _rules)."""
    return _rules(agent, now)[0]


def _rules(agent: Agent, now: datetime) -> tuple[dict[str, Any], set[str], set[str]]:
    """The effective desired state the rules judge by, read only, kept per process across
    batches (a deep copy of the spec per agent per batch was most of a 1,000-agent batch's
    time). It changes only with the version, the restriction or suspension, or when a live
    grant expires, so it is reused from when it was made until the first live grant's
    expiry. Kept with it: its callable tools and granted resources, the sets every event is
    checked against. `running` follows the suspension alone, not a stop's reach as
    desired_now's does (a query per agent): what it decides here, a call made after the
    suspension, is judged by the suspension's own time anyway (_ran_while_suspended)."""
    key = _facts(agent).rules_key
    kept = _rule_specs.get(key)
    if kept is None or not (kept[1] <= now and (kept[2] is None or now < kept[2])):
        spec = effective_desired(agent.enforced_spec, now, suspended=key[3])
        expiries = [parse_timestamp(grant["expires_at"], naive=UTC)  # naive: UTC, as the diff
                    for grant in spec.get("grants", [])]
        if len(_rule_specs) >= RULE_SPECS_KEPT:
            _rule_specs.clear()
        kept = _rule_specs[key] = (spec, now, min(expiries) if expiries else None,
                                   callable_tools(spec), granted_resources(spec))
    return kept[0], kept[3], kept[4]


# How long a counted batch's broken-rule jobs may take before recount_events takes them for
# lost (a Redis that failed over or restarted from disk) and counts the batch again.
JOBS_OVERDUE = timedelta(minutes=10)


def recount_events(limit: int = 5000, *, settled_seconds: float = 0,
                   jobs_overdue: timedelta = JOBS_OVERDUE) -> int:
    """Drain the outbox: run the rules over the events of batches stored but not counted
    (Redis was down, or the process died between commit and counting), and of batches whose
    broken-rule jobs have not all run `jobs_overdue` after they were queued (Redis lost them),
    then release their outbox rows as their own request does; returns how many events.
    Counting is idempotent (window members are event ids, a broken rule lands in its dedupe
    window's finding), so an event counted by its own request meanwhile is not counted twice.
    `settled_seconds` leaves alone batches so fresh their own request may still be counting;
    overdue jobs are looked for only while the ingest queue is empty (a backlog is jobs late,
    not lost, and counting again would add to it); `limit` stops after the batch that
    reaches it."""
    now = timezone.now()
    uncounted = Q(queued_at__isnull=True, received_at__lte=now - timedelta(seconds=settled_seconds))
    if windows.ingest_queue().count == 0:
        uncounted |= Q(queued_at__lte=now - jobs_overdue)
    waiting = UncountedBatch.objects.filter(uncounted).order_by("pk")
    batches: list[int] = []
    rows: list[BehaviourEvent] = []
    while len(rows) < limit:
        batch = waiting.filter(pk__gt=batches[-1] if batches else 0).first()
        if batch is None:
            break
        batches.append(batch.pk)
        # Its own days only (ts is the partition key); events the retention job dropped since
        # are gone, and nothing is left to judge of them.
        rows.extend(BehaviourEvent.objects.filter(
            pk__in=batch.events, ts__gte=batch.first_ts, ts__lte=batch.last_ts)
            .select_related("agent__active_version"))
    if not batches:
        return 0
    # This counting takes the batches over: jobs and releases of an earlier one no longer
    # answer for them.
    UncountedBatch.objects.filter(pk__in=batches).update(
        attempt=F("attempt") + 1, jobs=0, queued_at=None)
    held = list(UncountedBatch.objects.filter(pk__in=batches).values_list("pk", "attempt"))
    # Events of agents with no approved state are not judged (nothing to judge them by);
    # they enter the windows once the agent is approved (ensure_windows). Foreign events are
    # never judged: they are someone else's word about the agent.
    judged = [r for r in rows if r.agent is not None and r.agent.active_version is not None
              and not r.foreign]
    events = [Event(id=r.event_id, agent=r.agent_name, ts=r.ts, kind=r.kind, tool=r.tool,
                    resource=r.resource, record=r.record, action=r.action, amount=r.amount,
                    approved_by=r.approved_by, decision_id=r.decision_id,
                    input_tokens=r.input_tokens, output_tokens=r.output_tokens, cost=r.cost)
              for r in judged]
    agents = {r.agent.name: r.agent for r in judged}
    used_by = set(Decision.objects.filter(
        agent__in=[r.agent for r in judged], used_by_event__in=[e.id for e in events])
        .values_list("agent__name", "used_by_event"))
    signed = {(e.agent, e.id): ((e.agent, e.id) in used_by, False)
              for e in events if e.decision_id}
    violations = _static(events, agents, signed, now)
    breaches = _count_windows(events, agents, violations, now)
    jobs = _queue_violations(violations, held)
    jobs += group_rules.queue_breaches(breaches, held)
    for batch_id, attempt in held:
        event_store.release_counted(batch_id, jobs, attempt)
    return len(rows)


def _uuids(values: set[str]) -> list[str]:
    out = []
    for value in values:
        try:
            out.append(str(uuid.UUID(value)))
        except ValueError:
            continue
    return out


def _count_windows(events: list[Event], agents: dict[str, Agent],
                   violations: dict[int, list[Violation]], now: datetime) -> list[dict]:
    """Count the events in their per-agent and group windows (one pipeline); per-agent
    breaks go into `violations`, group breaches are returned. When Redis lost the windows
    since this process last looked (windows.EpochMoved: nothing was counted), every agent's
    windows are filled again and the batch counted once more (group windows take an event
    once, so counting it again there changes nothing)."""
    rules = group_rules.active_rules()
    # Each agent's id, approved spec and kept windows read once per batch, not per event.
    judged = {name: (facts.id, facts.spec, facts.windows) for name, agent in agents.items()
              if (facts := _facts(agent)).version is not None}
    checks: list[tuple[WindowCheck, str, datetime]] = []
    owners: list[int] = []  # the agent of each check
    spending = []
    for event in events:
        found = judged.get(event.agent)
        if found is None:
            continue
        agent_id, spec, made = found
        if event.resource and spec["limits"]:
            for check in window_checks(spec, event, agent_id, _durations, made):
                checks.append((check, event.id, event.ts))
                owners.append(agent_id)
        if spec.get("budgets"):
            spending.extend((agent_id, spec, event, check, index)
                            for check, index in budget_checks(spec, event, agent_id))
    grouped = group_rules.group_checks(events, agents, rules)
    group_checks = ([(check, event.ts) for _, event, check in grouped]
                    + [(check, event.ts) for _, _, event, check, _ in spending])
    # The epoch is left to the window script only when it runs (per-agent checks): budgets
    # alone are counted by the group windows' script, which does not read it.
    judged_agents = list({a.id: a for a in agents.values()}.values())
    ensure_windows(judged_agents, now, counting=bool(checks))
    if rules:
        group_rules.ensure_group_windows(rules, now)
    try:
        counts, totals = group_windows.count_with_groups(checks, group_checks, now)
    except windows.EpochMoved:  # lost since the group windows were checked, too
        ensure_windows(judged_agents, now)
        if rules:
            group_rules.ensure_group_windows(rules, now)
        counts, totals = group_windows.count_with_groups(checks, group_checks, now)
    for (check, event_id, _), agent_id, seen in zip(checks, owners, counts, strict=True):
        if seen > check.limit:
            violations.setdefault(agent_id, []).append(window_violation(check, seen, event_id))
    for (agent_id, spec, event, _, index), (total, _) in zip(
            spending, totals[len(grouped):], strict=True):
        if violation := budget_violation(spec, index, total, event.id):
            violations.setdefault(agent_id, []).append(violation)
    return group_rules.over_limit(grouped, totals[:len(grouped)])


@dataclass(slots=True)
class _Facts:
    """What ingest reads of an agent and its approved version, made once per agent object:
    the process keeps each agent as of its row (_batch_agents), so a batch reads these
    instead of the model's descriptors and cache keys again for every agent (a twentieth of
    a 1,000-agent batch's CPU)."""

    id: int
    version: DesiredStateVersion | None
    spec: dict[str, Any] | None
    rules_key: tuple | None  # _rules' cache key
    horizon: int | None  # _version_horizon
    windows: dict[tuple, Any]  # window_checks' memo (_kept_windows)


def _facts(agent: Agent) -> _Facts:
    """The agent's _Facts: kept on an agent _batch_agents keeps (read only, as of its row),
    made afresh for any other (a caller's agent may change under it)."""
    return agent.__dict__.get("_ingest_facts") or _facts_of(agent)


def _facts_of(agent: Agent) -> _Facts:
    version = agent.active_version
    if version is None:
        return _Facts(agent.id, None, None, None, None, {})
    return _Facts(agent.id, version, version.spec,
                  (version.pk, version.spec_sha256, repr(agent.restricted_to),
                   agent.lifecycle == Lifecycle.SUSPENDED),
                  _version_horizon(version), _kept_windows(agent.id, version))


WINDOWS_KEPT = 20_000
# Per (agent id, version id, spec hash): the agent's windows per resource as window_checks
# makes them (a version's spec never changes; a batch over a thousand agents met each agent's
# resource once or twice, so a per-batch memo made them again for nearly every event).
_windows_kept: dict[tuple[int, int, str], dict[tuple, Any]] = {}
_durations: dict[str, int] = {}  # seconds per duration text, filled by window_checks


def _kept_windows(agent_id: int, version: DesiredStateVersion) -> dict[tuple, Any]:
    """The memo window_checks keeps an agent's windows in, per process and version."""
    key = (agent_id, version.id, version.spec_sha256)
    kept = _windows_kept.get(key)
    if kept is None:
        if len(_windows_kept) >= WINDOWS_KEPT:
            _windows_kept.clear()
        kept = _windows_kept[key] = {}
    return kept


REFILL_MAX_EVENTS = 50_000


def ensure_windows(agents: list[Agent], now: datetime, *, counting: bool = False) -> None:
    """Make an agent's windows hold every stored event still inside them before they are
    counted or peeked: events adopted from an unregistered agent or sent before the first
    approval, events under limits a new version added, and whatever a Redis restart lost.
    A marker per agent says which generation they were filled for (each use keeps it for
    another longest window; windows.to_refill); without it the stored events go in (into the
    windows only: they are not judged again). However many agents need it, one read of their
    stored events and one Redis pipeline (after a Redis restart, a batch naming a thousand
    agents made three thousand round trips). `counting`: as windows.to_refill's (the caller
    counts next with the window script). Raises RedisError."""
    limited = [(a, horizon) for a in agents if (horizon := _facts(a).horizon) is not None]
    refill = set(windows.to_refill([(a.id, a.generation, h) for a, h in limited],
                                   counting=counting))
    stale = [(agent, horizon) for agent, horizon in limited if agent.id in refill]
    if stale:
        _refill(stale, now)


_horizons: dict[tuple[int, str], int | None] = {}  # a version's spec never changes


def _version_horizon(version: DesiredStateVersion) -> int | None:
    """_horizon of a version's spec, None when it has no windows (kept per process)."""
    key = (version.pk, version.spec_sha256)
    if key not in _horizons:
        if len(_horizons) >= VERSION_SPECS_KEPT:
            _horizons.clear()
        spec = version.spec
        _horizons[key] = _horizon(spec) if spec.get("limits") or spec.get("budgets") else None
    return _horizons[key]


def _horizon(spec: dict[str, Any]) -> int:
    """Seconds the longest of a spec's windows (limits and budgets) spans."""
    return max(duration_seconds(rule["per"])
               for rule in [*spec.get("limits", []), *spec.get("budgets", [])])


def _refill(stale: list[tuple[Agent, int]], now: datetime) -> None:
    """Put each (agent, seconds its longest window spans)'s stored events of that span into its
    windows (its latest REFILL_MAX_EVENTS at most) and mark them filled for its generation."""
    rows: dict[int, list[tuple]] = {agent.pk: [] for agent, _ in stale}
    for agent_id, *row in _stored_since([(a.pk, now - timedelta(seconds=h)) for a, h in stale]):
        rows[agent_id].append(row)
    checks, spending = [], []
    for agent, _ in stale:
        spec = agent.active_version.spec
        durations = {limit["per"]: duration_seconds(limit["per"]) for limit in spec["limits"]}
        for event_id, ts, kind, resource, record, tokens_in, tokens_out, cost in rows[agent.pk]:
            event = Event(id=event_id, agent=agent.name, ts=ts, kind=kind, resource=resource,
                          record=record, input_tokens=tokens_in, output_tokens=tokens_out,
                          cost=cost)
            checks.extend((check, event_id, ts)
                          for check in window_checks(spec, event, agent.pk, durations))
            spending.extend((check, ts) for check, _ in budget_checks(spec, event, agent.pk))
    windows.fill(checks, now)
    if spending:
        group_windows.fill(spending, now)
    windows.mark_filled([(agent.pk, agent.generation, horizon) for agent, horizon in stale])


REFILL_COLUMNS = ("agent_id", "event_id", "ts", "kind", "resource", "record", "input_tokens",
                  "output_tokens", "cost")


def _stored_since(since: list[tuple[int, datetime]]) -> Any:  # a values_list query
    """The REFILL_COLUMNS of each (agent id, moment)'s own events at or after the moment, its
    latest REFILL_MAX_EVENTS at most, in one query whatever the number of agents."""
    by_moment: dict[datetime, list[int]] = {}
    for agent_id, moment in since:
        by_moment.setdefault(moment, []).append(agent_id)
    within = Q()
    for moment, agent_ids in by_moment.items():
        within |= Q(agent_id__in=agent_ids, ts__gte=moment)
    latest = Window(RowNumber(), partition_by=F("agent_id"), order_by=F("ts").desc())
    return (BehaviourEvent.objects.filter(within, foreign=False)
            .annotate(latest=latest).filter(latest__lte=REFILL_MAX_EVENTS)
            .values_list(*REFILL_COLUMNS))


def _queue_violations(violations: dict[int, list[Violation]],
                      held: list[event_store.Held]) -> int:
    """Hand broken rules to the ingest workers (called after commit; raises RedisError, so
    the events stay uncounted when they could not be queued), each job saying which outbox
    rows (`held`) it answers for; returns how many jobs. Two round trips for the whole
    batch: the dedupe windows' names, then the jobs."""
    broken: dict[int, dict[str, Violation]] = {}
    for agent_id, found in violations.items():
        # One rule broken many times in a batch is one window: keep its latest count.
        by_rule = broken.setdefault(agent_id, {})
        for violation in found:
            rule = f"{agent_id}:{violation.kind}:{violation.pointer}:{violation.expected}"
            by_rule[rule] = _later(by_rule[rule], violation) if rule in by_rule else violation
    broken = {agent_id: by_rule for agent_id, by_rule in broken.items() if by_rule}
    if not broken:
        return 0
    window_of = iter(windows.window_ids([(rule, v.event_id, v.window_seconds)
                                         for by_rule in broken.values()
                                         for rule, v in by_rule.items()]))
    return _enqueue_violations({agent_id: [{**v.to_dict(), "window": next(window_of)}
                                           for v in by_rule.values()]
                                for agent_id, by_rule in broken.items()}, held)


# Agents whose broken rules one ingest job records. A job per agent cost a batch more than
# counting its events once a storm broke most agents' rules in every batch (RQ makes, encodes
# and stores each job); a job per batch would put every agent's enforcement behind one worker.
AGENTS_PER_JOB = 25


def _enqueue_violations(found: dict[int, list[dict]], held: list[event_store.Held]) -> int:
    """Queue broken rules for the ingest workers, AGENTS_PER_JOB agents a job, all in one
    round trip (runtime.jobs.record_violations_of records each agent on its own); returns
    how many jobs."""
    retry = retries.ingest_job()
    agents = list(found.items())
    jobs = windows.ingest_queue().enqueue_many([
        Queue.prepare_data("runtime.jobs.record_violations_of", (dict(chunk),),
                           {"held": held} if held else None, retry=retry,
                           description=_described(chunk))
        for chunk in (agents[start:start + AGENTS_PER_JOB]
                      for start in range(0, len(agents), AGENTS_PER_JOB))])
    return len(jobs)


def _described(agents: list[tuple[int, list[dict]]]) -> str:
    """A job's description (what RQ's dashboards show) naming its agents: RQ would otherwise
    repr the whole argument, every violation of every agent, and then cut it to 75
    characters (a fifth of a storm batch's enqueueing)."""
    return (f"runtime.jobs.record_violations_of(agents {', '.join(str(a) for a, _ in agents)}: "
            f"{sum(len(found) for _, found in agents)} broken rules)")


def requeue_violations(agent_id: int, violations: list[dict],
                       held: list[event_store.Held] | None = None) -> None:
    """One agent's broken rules in a job of their own, with the ingest job's retries: what a
    job of several agents does with an agent whose recording failed. The outbox rows the
    job answers for (`held`) wait for it too."""
    if held:
        event_store.jobs_added(held)
    windows.ingest_queue().enqueue("runtime.jobs.record_violations", agent_id, violations,
                                   held=held, retry=retries.ingest_job())


def _later(first: Violation, then: Violation) -> Violation:
    """Of two breaks of one rule, the one with the larger observed count (the window's peak),
    keeping the first event that opened it."""
    if isinstance(then.actual, int | float) and isinstance(first.actual, int | float) and (
            then.actual > first.actual):
        return Violation(first.kind, first.pointer, first.expected, then.actual, first.area,
                         first.event_id, then.rule, first.window_seconds)
    return first


def _fingerprint(violation: dict[str, Any]) -> str:
    material = f"{violation['kind']}|{violation['pointer']}|{violation['window']}"
    return hashlib.sha256(material.encode()).hexdigest()


def record_violations(agent_id: int, violations: list[dict[str, Any]]) -> list[Finding]:
    """Broken rules become behaviour findings (one per rule per window) and are enforced by
    the spec's mode for their area: block suspends the agent through its connector, escalate
    opens an escalation, log records it, correct records it and re-checks the configuration."""
    agent = Agent.objects.select_related("active_version").get(pk=agent_id)
    spec = agent.active_version.spec
    now = timezone.now()
    opened: list[Finding] = []
    to_block: list[Finding] = []
    waivers = active_waivers(agent, now)
    with transaction.atomic():
        for violation in violations:
            finding, created = _finding_for(agent, violation, now)
            if created:
                opened.append(finding)
            if finding.status != FindingStatus.OPEN:
                continue  # already enforced (a retried job enforces only what is left)
            mode = ("log" if violation["area"] == WARNING_AREA
                    else mode_for(spec, _AreaOnly(violation["area"])))
            waiver = next((w for w in waivers if is_waived((w.pointer,), violation["pointer"])),
                          None)
            if waiver is not None:
                move_finding(finding, FindingStatus.LOGGED, agent=agent, reason=(
                    f"{violation['rule']}; allowed: waiver #{waiver.pk} ({waiver.ticket}) "
                    f"until {waiver.expires_at:%Y-%m-%d %H:%M:%S} UTC"))
            elif mode == "block":
                to_block.append(finding)
            elif mode == "escalate":
                open_escalation(agent, finding, reason=violation["rule"],
                                caused_by=_person_behind(agent, violation["event_id"]))
            else:
                move_finding(finding, FindingStatus.LOGGED, agent=agent, reason=(
                    f"{violation['rule']}; recorded (mode {mode}: what an agent did cannot be "
                    "undone)"))
                if mode == "correct":
                    request_reconcile(agent.pk, Trigger.FINDING)
    if to_block:
        _block_for_behaviour(agent, to_block)
    if opened:
        # The agent's conditions show it now (Drifted, Escalated or Suspended), not at the
        # next pass: a converged agent's resync has no reason to run one.
        with transaction.atomic():
            refresh_status(agent, now=timezone.now())
    return opened


def _person_behind(agent: Agent, event_id: str) -> int | None:
    """The id of the person behind the event that broke a rule: its sender, or the issuer of
    the agent token that sent it."""
    # Its key gives its time, so one day's partition is read, not every event of the agent.
    stored = EventKey.objects.filter(agent_name=agent.name, event_id=event_id).values("ts")
    row = (BehaviourEvent.objects.filter(agent=agent, event_id=event_id, foreign=False,
                                         ts=Subquery(stored[:1]))
           .values_list("sender_user_id", "sender_token__user_id")[:1])
    found = next(iter(row), None)
    return next((pk for pk in found if pk is not None), None) if found else None


def _finding_for(agent: Agent, violation: dict[str, Any], now: datetime) -> tuple[Finding, bool]:
    """The finding of a broken rule's window, created (audited, alerted) the first time."""
    fingerprint = _fingerprint(violation)
    finding = Finding.objects.select_for_update(no_key=True).filter(agent=agent,
                                                         fingerprint=fingerprint).first()
    if finding is None:
        finding = _same_window(agent, violation, now)
    if finding is not None:
        Finding.objects.filter(pk=finding.pk).update(last_seen=now, actual=violation["actual"])
        return finding, False
    finding = open_finding(
        agent, why=violation["rule"], after={"event": violation["event_id"]},
        alert_fields={"message": violation["rule"]}, fingerprint=fingerprint,
        kind=violation["kind"], pointer=violation["pointer"], expected=violation["expected"],
        actual=violation["actual"], severity="high", area=violation["area"],
        generation=agent.generation, behaviour=True, reason=violation["rule"],
        first_seen=now, detected_at=now, last_seen=now,
        observed_at=violation.get("observed_at") or now)
    return finding, True


def _same_window(agent: Agent, violation: dict[str, Any], now: datetime) -> Finding | None:
    """The finding this rule opened less than its dedupe window ago, found in the database: a
    Redis restart loses the window's name, and the next break must not open a second finding
    (and escalation) for the same window."""
    seconds = int(violation.get("window_seconds") or DEDUPE_SECONDS)
    candidates = Finding.objects.select_for_update(no_key=True).filter(
        agent=agent, behaviour=True, kind=violation["kind"], pointer=violation["pointer"],
        first_seen__gt=now - timedelta(seconds=seconds)).order_by("-first_seen")
    return next((f for f in candidates if f.expected == violation["expected"]), None)


@dataclass(frozen=True)
class _AreaOnly:
    """Just enough of a drift for mode_for: its enforcement area."""

    area: str


def _block_for_behaviour(agent: Agent, findings: list[Finding]) -> None:
    operation = Operation(OperationKind.SUSPEND, "agent")
    key = idempotency_key(agent.name, agent.generation, operation, findings[0].pk)
    held = enforcement_held(agent)
    if held:  # recorded, not applied: the same promise as for configuration drift
        with transaction.atomic():
            for finding in findings:
                move_finding(finding, FindingStatus.LOGGED, agent=agent,
                             reason=f"enforcement mode block, not applied: {held}")
            audit.record(actor=SYSTEM, action=AuditAction.CORRECTION_SHADOWED,
                         target=f"agent:{agent.name}", agent=agent.name,
                         after={**operation.to_dict(), "key": key}, reason=held)
        return
    if agent.lifecycle != Lifecycle.SUSPENDED:
        connector_for(agent).apply(agent, operation.to_dict(), key)
    with transaction.atomic():
        for finding in findings:
            move_finding(finding, FindingStatus.BLOCKED, agent=agent)
        suspend_agent(agent, actor=SYSTEM,
                      reason="; ".join(f.reason for f in findings)[:1000])


@transaction.atomic
def assign_unregistered(name: str, *, actor: Any, owner: Any) -> UnregisteredAgent:
    """Compliance hands a shadow agent to an owner, who then registers it."""
    if not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed("Only compliance staff assign unregistered agents.")
    shadow = UnregisteredAgent.objects.select_for_update(no_key=True).filter(name=name).first()
    if shadow is None or shadow.registered:
        raise NotFound(f"No unregistered agent named {name!r}.")
    if owner is None or not has_role(owner, Role.OWNER):
        raise Invalid("Assign to a person holding the owner role.",
                      details=[{"pointer": "/owner", "message": "expected an owner's username"}])
    before = shadow.assigned_owner.username if shadow.assigned_owner_id else None
    shadow.assigned_owner = owner
    shadow.save(update_fields=["assigned_owner"])
    audit.record(actor=actor, action=AuditAction.UNREGISTERED_ASSIGNED,
                 target=f"unregistered:{name}", before={"owner": before},
                 after={"owner": owner.username})
    return shadow


def adopt_unregistered(agent: Agent, *, actor: Any) -> int:
    """When a shadow agent is registered, its earlier events and observations become its own
    (call inside the registration's transaction); events others sent under its name are kept but
    flagged foreign, so they never count toward its rules, and observations others reported stay
    with the shadow. Returns how many events it adopted."""
    shadow = (UnregisteredAgent.objects.select_for_update(no_key=True)
              .filter(name=agent.name).first())
    if shadow is None:
        return 0
    if shadow.assigned_owner_id and shadow.assigned_owner_id != getattr(actor, "pk", None) \
            and not has_role(actor, Role.ADMIN):
        raise NotAllowed(f"{agent.name} was assigned to {shadow.assigned_owner.username}; "
                         "only they may register it.")
    waiting = BehaviourEvent.objects.filter(agent_name=agent.name, agent__isnull=True)
    foreign = waiting.exclude(_own_traffic(agent, waiting)).update(agent=agent, foreign=True)
    adopted = waiting.update(agent=agent) + foreign
    if foreign:  # a foreign event reserves no id: the agent's own may use it
        _release_keys(agent)
    # What its owner's or an admin's platform reported becomes its observed-state history, as
    # if it had been registered. Others' reports stay with the shadow: a push agent's latest
    # report is its actual state, and another owner's would start its first pass with drift.
    reports = ObservedState.objects.filter(unregistered=shadow, agent__isnull=True)
    reporters = User.objects.filter(username__in=reports.values("reported_by").distinct())
    trusted = [u.username for u in reporters
               if u.pk == agent.owner_id or has_role(u, Role.ADMIN)]
    observations = reports.filter(reported_by__in=trusted).update(agent=agent)
    left = reports.count()
    shadow.registered = True
    shadow.save(update_fields=["registered"])
    audit.record(actor=actor, action=AuditAction.UNREGISTERED_ADOPTED,
                 target=f"agent:{agent.name}", agent=agent.name,
                 after={"events": adopted - foreign, "foreign_events": foreign,
                        "observations": observations, "foreign_observations": left},
                 reason="a shadow agent was registered; its events count in the rule windows "
                        "once it is approved, except those others sent under its name")
    return adopted


def _release_keys(agent: Agent) -> int:
    """Let go of the keys (the ids ingest counts as taken) of the agent's foreign events (just
    adopted: read by agent, as the by-name index holds only unregistered agents' events),
    unless one of its own events holds the same id."""
    events = BehaviourEvent.objects.filter(agent=agent, event_id=OuterRef("event_id"))
    return EventKey.objects.filter(agent_name=agent.name).filter(
        Exists(events.filter(foreign=True))).exclude(
        Exists(events.filter(foreign=False))).delete()[0]


def _own_traffic(agent: Agent, events: Any) -> Q:
    """Events a shadow agent's new owner would have counted: sent by that owner or by an admin
    (a platform's principal), or stored before senders were recorded."""
    senders = User.objects.filter(pk__in=events.exclude(sender_user=None)
                                  .values("sender_user").distinct())
    trusted = [u.pk for u in senders if u.pk == agent.owner_id or has_role(u, Role.ADMIN)]
    return Q(sender_user__in=trusted) | Q(sender="")
