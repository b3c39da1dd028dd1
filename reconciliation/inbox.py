"""The approvers' inbox (and an owner's reminders to recertify) as one queue: pending
proposals, open escalations, pending runtime decisions and the lighter paths that wait for a
second person (proposed retirements, waivers pending a second approver, owners' shadow
requests, owners' waiver requests), most urgent first (snoozed escalations leave it until
their time comes).

The queue is built in two steps so that a long one costs what one page of it costs: the
entries (a few columns of every waiting row, folded into incidents, counted and sorted: what
paging needs) and then the items of one page (the rows a card shows, read for that page only).
An incident is one entry, so its escalations are never split across two pages."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.db.models import Case, CharField, Count, Exists, OuterRef, Q, QuerySet, Value, When
from django.db.models.functions import Concat
from django.utils import timezone

from audit.sentences import drift_phrase
from config.money import money
from config.times import parse_timestamp
from reconciliation.incidents import NAMED_CHANGES, escalation_key, group
from reconciliation.models import AgentStatus, Escalation
from registry.choices import Lifecycle, ReviewVerdict, Role, VersionState, WaiverState
from registry.models import (
    Agent,
    Approval,
    DesiredStateVersion,
    Retirement,
    ReviewComment,
    Waiver,
    WaiverRequest,
)
from registry.roles import has_role

PROPOSAL, ESCALATION = "proposal", "escalation"

# --- the queue as one approver sees it: only what they may decide, most urgent first ------------

DECISION, INCIDENT = "decision", "incident"
RECERTIFICATION = "recertification"  # an owner's: recertify their agent by its review date
# Lighter paths to a spec change's outcome, each waiting for a second person (four eyes).
RETIREMENT, WAIVER, SHADOW = "retirement", "waiver", "shadow"
REQUESTS = (RETIREMENT, WAIVER, SHADOW)
KINDS = (DECISION, INCIDENT, ESCALATION, PROPOSAL, *REQUESTS, RECERTIFICATION)
_FINDING_KEY_FIELDS = ("agent_id", "behaviour", "observed_at", "detected_at",
                       "cause_key")  # incident_key's


@dataclass
class Item:
    """One line of an approver's queue: a proposal, a runtime decision, or an incident (one
    or more escalations one cause produced, decided once)."""

    kind: str  # decision | incident | escalation | proposal | recertification
    key: str  # stable id in the page and the API: proposal-12, escalation-5
    agent: str
    what: str
    severity: str
    waiting_since: datetime
    deadline: datetime
    link: str
    assignee: str = ""
    acknowledged: bool = False
    # the escalations inside (for an incident or an escalation; none for a proposal)
    escalations: list[Escalation] = field(default_factory=list)
    version: DesiredStateVersion | None = None
    subject: Any = None  # a request's row: the Retirement, the Waiver, the agent's AgentStatus

    def seconds_left(self, now: datetime) -> int:
        """Time to the SLA or deadline; negative once it has passed."""
        return int((self.deadline - now).total_seconds())

    def to_dict(self, now: datetime) -> dict:
        """The API form of one line."""
        return {"kind": self.kind, "key": self.key, "agent": self.agent, "what": self.what,
                "severity": self.severity, "waiting_since": self.waiting_since.isoformat(),
                "deadline": self.deadline.isoformat(), "seconds_left": self.seconds_left(now),
                "assignee": self.assignee or None, "acknowledged": self.acknowledged,
                "link": self.link,
                "escalations": [e.pk for e in self.escalations],
                "findings": [e.finding_id for e in self.escalations if e.finding_id]}


@dataclass(frozen=True)
class Entry:
    """One line of the queue before it is drawn: what sorting, counting and paging need (read
    from a few columns), and the ids of the rows its item is made of."""

    kind: str
    key: str
    agent: str
    waiting_since: datetime
    deadline: datetime
    ids: tuple[int, ...] = ()  # the proposal's version, or the incident's escalations in order
    item: Item | None = None  # a reminder is whole already


def by_urgency(line: Item | Entry) -> tuple:
    """Least time left to its SLA or deadline first (the queue's default order)."""
    return (line.deadline, line.waiting_since, line.key)


def by_age(line: Item | Entry) -> tuple:
    """Longest waiting first (the approvals queue's order)."""
    return (line.waiting_since, line.key)


def time_left(seconds: int) -> str:
    """"4 min left", "2 h 5 min left", "overdue 3 min": what the urgency column says."""
    late, seconds = seconds < 0, abs(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    parts = ([f"{days} d"] if days else []) + ([f"{hours} h"] if hours else [])
    if not days:
        parts.append(f"{minutes} min" if minutes or hours else f"{seconds % 60} s")
    text = " ".join(parts[:2])
    return f"overdue {text}" if late else f"{text} left"


def sla(kind: str) -> timedelta:
    """How long an item of this kind may wait (settings INBOX_SLA_*)."""
    seconds = {DECISION: settings.INBOX_SLA_DECISION_SECONDS,
               PROPOSAL: settings.INBOX_SLA_PROPOSAL_SECONDS}.get(
        PROPOSAL if kind in REQUESTS else kind, settings.INBOX_SLA_ESCALATION_SECONDS)
    return timedelta(seconds=seconds)


def proposals_for(user) -> QuerySet:
    """Pending proposals `user` may decide: not their own, not made with a token they hold,
    not for an agent they own or that would go to them (four eyes), not already approved by
    them in this revision, and not one whose current revision an approver sent back with
    "request changes" (the author's turn until they revise it)."""
    pending = DesiredStateVersion.objects.filter(state=VersionState.PENDING).exclude(
        Exists(changes_requested()))  # the author's turn, not an approver's
    if user is None:  # everything waiting, whoever decides it (SLA sweeps, team channels)
        return pending
    approved = Approval.objects.filter(version=OuterRef("pk"), approver=user,
                                       revision=OuterRef("revision"))
    return (pending
            .exclude(Q(proposed_by=user) | Q(token_holder=user) | Q(agent__in=_owned_by(user))
                     | Q(metadata__owner=user.username))
            .exclude(Exists(approved)))


MINE_SHOWN = 50


def proposals_by(user) -> list[DesiredStateVersion]:
    """The person's own proposals, newest first (the latest MINE_SHOWN), each with `your_turn`
    set when an approver requested changes to its current revision and it is still pending:
    the owner's side of the queue."""
    mine = (DesiredStateVersion.objects.filter(proposed_by=user)
            .annotate(changes_asked=Exists(changes_requested()))
            .select_related("agent", "decided_by")
            .defer("spec", "metadata", "guardrail_results", "permission_changes")
            .order_by("-created_at", "-pk")[:MINE_SHOWN])
    for version in mine:
        version.your_turn = version.state == VersionState.PENDING and version.changes_asked
    return list(mine)


def changes_requested() -> QuerySet:
    """"Request changes" on a proposal's current revision, as a subquery of the proposal
    (OuterRef pk): its author's turn until a new revision."""
    return ReviewComment.objects.filter(version=OuterRef("pk"), revision=OuterRef("revision"),
                                        verdict=ReviewVerdict.REQUEST_CHANGES)


def _owned_by(user) -> QuerySet:
    """The ids of `user`'s own agents, as a subquery: excluding them reads the owner index
    for this person's agents, where a join on the owner reads every agent in the fleet."""
    return Agent.objects.filter(owner=user).values("pk")


def escalations_for_user(user, now: datetime | None = None) -> QuerySet:
    """Open, awake escalations `user` may decide: not about an agent they own, not a runtime
    decision they asked for themselves (four eyes)."""
    if user is None:
        return Escalation.objects.awake(now)
    return (Escalation.objects.awake(now).exclude(agent__in=_owned_by(user))
            .exclude(decision__asked_by=user).exclude(caused_by=user))


def queue_for(user, now: datetime | None = None, kind: str = "") -> list[Entry]:
    """The queue `user` decides as entries, most urgent first: every waiting proposal and
    escalation (escalations one cause produced folded into one incident) and an owner's
    reminders, from a few columns each (no spec, no card)."""
    now = now or timezone.now()
    entries: list[Entry] = []
    if user is not None and kind in ("", RECERTIFICATION):
        entries += [_reminder_entry(item) for item in reminders_for(user, now)]
    if kind != RECERTIFICATION and (user is None or has_role(user, Role.APPROVER)):
        if kind in ("", PROPOSAL):
            wait = sla(PROPOSAL)
            entries += [
                Entry(PROPOSAL, f"proposal-{pk}", agent, created, created + wait, (pk,))
                for pk, created, agent in proposals_for(user).order_by("created_at", "pk")
                .values_list("pk", "created_at", "agent__name")]
        if kind in ("", *REQUESTS):
            entries += [_reminder_entry(item) for item in requests_for(user, now)
                        if not kind or item.kind == kind]
        if kind not in (PROPOSAL, *REQUESTS):
            entries += [e for e in _escalation_entries(user, now) if not kind or e.kind == kind]
    return sorted(entries, key=by_urgency)


def items(entries: list[Entry]) -> list[Item]:
    """The items of these entries (one page of the queue), in their order: one query for the
    proposals and one for the escalations, whatever their number."""
    version_ids = [e.ids[0] for e in entries if e.kind == PROPOSAL]
    escalation_ids = [pk for e in entries if e.kind != PROPOSAL for pk in e.ids]
    versions = DesiredStateVersion.objects.select_related("agent", "agent__owner").defer(
        "spec", "metadata", "guardrail_results", "permission_changes").in_bulk(version_ids)
    escalations = Escalation.objects.select_related(
        "agent", "finding", "decision", "assignee").in_bulk(escalation_ids)
    Escalation.read_for_offers(list(escalations.values()))
    made = []
    for entry in entries:
        if entry.item is not None:
            made.append(entry.item)
        elif entry.kind == PROPOSAL:
            if entry.ids[0] in versions:  # decided since the entries were read: gone
                made.append(_proposal_item(versions[entry.ids[0]]))
        elif members := [escalations[pk] for pk in entry.ids if pk in escalations]:
            made += _escalation_items(members)
    return made


def items_for(user, now: datetime | None = None, kind: str = "") -> list[Item]:
    """The whole queue `user` decides as items, most urgent first (the sweeps' view; pages
    draw one page of queue_for's entries instead)."""
    return items(queue_for(user, now, kind))


COUNTS = ("proposals", "escalations", "decisions", "requests", "recertifications")


def tally(entries: list[Entry]) -> dict[str, int]:
    """The counts the badge and the queue's summary show (an incident counts once)."""
    counts = dict.fromkeys(COUNTS, 0)
    column = {PROPOSAL: "proposals", DECISION: "decisions", INCIDENT: "escalations",
              ESCALATION: "escalations", RECERTIFICATION: "recertifications",
              **dict.fromkeys(REQUESTS, "requests")}
    for entry in entries:
        counts[column[entry.kind]] += 1
    counts["total"] = sum(counts.values())
    return counts


def counts_for(user, now: datetime | None = None) -> dict[str, int]:
    """What waits for `user` to decide, as the queue shows it (tally of queue_for: an incident
    counts once). Every page's nav badge asks this, so it is counted in the database (an
    incident is a distinct incident_key) and no row of the queue is read."""
    now = now or timezone.now()
    counts = dict.fromkeys(COUNTS, 0)
    if user is not None:
        counts["recertifications"] = len(reminders_for(user, now))
    if user is None or has_role(user, Role.APPROVER):
        counts["proposals"] = proposals_for(user).count()
        counts["requests"] = count_requests(user, now)
        alone = Q(decision__isnull=True)
        # incident_key's: a named change's incident is its cause key, on any agent; any
        # other pass's is its (agent, observation, detection)
        named = Q(*[Q(finding__cause_key__startswith=p) for p in NAMED_CHANGES],
                  _connector=Q.OR)
        found_in_pass = Case(
            When(named, then=Concat(Value("cause|"), "finding__cause_key")),
            default=Concat("finding__agent_id", Value("|"), "finding__observed_at",
                           Value("|"), "finding__detected_at", output_field=CharField()),
            output_field=CharField())
        tallied = escalations_for_user(user, now).order_by().aggregate(
            decisions=Count("pk", filter=Q(decision__isnull=False)),
            unfound=Count("pk", filter=alone & Q(finding__isnull=True)),
            behaviour=Count("finding", distinct=True,
                            filter=alone & Q(finding__behaviour=True)),
            passes=Count(found_in_pass, distinct=True,
                         filter=alone & Q(finding__behaviour=False)))
        counts["decisions"] = tallied["decisions"]
        counts["escalations"] = (tallied["unfound"] + tallied["behaviour"]
                                 + tallied["passes"])
    counts["total"] = sum(counts.values())
    return counts


def _escalation_entries(user, now: datetime) -> list[Entry]:
    """The waiting escalations as entries, folded into incidents by escalation_key from plain
    tuples (no model instances: every page's badge reads them)."""
    rows = (escalations_for_user(user, now).order_by("opened_at", "pk").values_list(
        "pk", "opened_at", "agent__name", "decision_id", "decision__expires_at", "finding_id",
        *(f"finding__{name}" for name in _FINDING_KEY_FIELDS)))
    groups: dict[tuple, list[tuple]] = {}
    for row in rows:
        pk, finding_id, finding = row[0], row[5], row[6:]
        key = escalation_key(SimpleNamespace(
            pk=pk, finding_id=finding_id, finding=finding_id and SimpleNamespace(
                pk=finding_id, **dict(zip(_FINDING_KEY_FIELDS, finding, strict=True)))))
        groups.setdefault(key, []).append(row)
    entries = []
    decision_wait, escalation_wait = sla(DECISION), sla(ESCALATION)
    for members in groups.values():
        pk, opened, agent, decision_id, expires = members[0][:5]
        ids = tuple(m[0] for m in members)
        if decision_id is not None:
            deadline = opened + decision_wait
            if expires is not None:
                deadline = min(deadline, expires)
            entries.append(Entry(DECISION, f"escalation-{pk}", agent, opened, deadline, ids))
        else:
            entries.append(Entry(INCIDENT if len(members) > 1 else ESCALATION,
                                 f"escalation-{pk}", agent, opened,
                                 opened + escalation_wait, ids))
    return entries


def _requests(user, now: datetime) -> tuple[QuerySet, QuerySet, QuerySet, QuerySet]:
    """The rows of the lighter paths waiting for `user` as the second person: retirements an
    owner proposed, waivers pending a second approver, owners' waiver requests, owners'
    shadow requests. Four eyes as their actions judge it: never an agent `user` owns, never
    one they asked for themselves."""
    retirements = Retirement.objects.filter(state=VersionState.PENDING)
    waivers = Waiver.objects.filter(state=WaiverState.PENDING, withdrawn_at__isnull=True,
                                    expires_at__gt=now)
    asked = WaiverRequest.objects.filter(state=VersionState.PENDING)
    shadows = AgentStatus.objects.exclude(shadow_request={})
    if user is not None:
        retirements = retirements.exclude(proposed_by=user).exclude(agent__in=_owned_by(user))
        waivers = waivers.exclude(granted_by=user).exclude(agent__in=_owned_by(user))
        asked = asked.exclude(requested_by=user).exclude(agent__in=_owned_by(user))
        shadows = (shadows.exclude(agent__in=_owned_by(user))
                   .exclude(shadow_request__by_id=user.pk))
    return retirements, waivers, asked, shadows


def requests_for(user, now: datetime) -> list[Item]:
    """The lighter paths waiting for `user` (see _requests) as whole items (there are few)."""
    retirements, waivers, asked, shadows = _requests(user, now)
    made = [_retirement_item(r) for r in retirements.select_related("agent", "proposed_by")
            .order_by("created_at", "pk")]
    made += [_waiver_item(w) for w in waivers.select_related("agent", "granted_by")
             .order_by("created_at", "pk")]
    made += [_waiver_request_item(w) for w in asked.select_related("agent", "requested_by")
             .order_by("created_at", "pk")]
    made += [_shadow_item(s) for s in shadows.select_related("agent").order_by("agent__name")]
    return made


def count_requests(user, now: datetime) -> int:
    """How many requests_for(user, now) holds, in one query (every page's badge asks)."""
    first, *rest = (rows.order_by().values_list("pk") for rows in _requests(user, now))
    return first.union(*rest, all=True).count()


def _retirement_item(retirement) -> Item:
    name = retirement.agent.name
    return Item(RETIREMENT, f"retirement-{retirement.pk}", name,
                f"retire {name} (proposed by {retirement.proposed_by.username}): "
                f"{retirement.reason.strip()[:120]}", "high", retirement.created_at,
                retirement.created_at + sla(RETIREMENT), f"/agents/{name}/#retirement",
                subject=retirement)


def _waiver_item(waiver) -> Item:
    name = waiver.agent.name
    return Item(WAIVER, f"waiver-{waiver.pk}", name,
                f"waive {waiver.pointer} until {waiver.expires_at:%Y-%m-%d %H:%M} UTC "
                f"(by {waiver.granted_by.username}, {waiver.ticket}): "
                f"{waiver.reason.strip()[:120]}", "medium", waiver.created_at,
                min(waiver.created_at + sla(WAIVER), waiver.expires_at),
                f"/agents/{name}/#waivers", subject=waiver)


def _waiver_request_item(request) -> Item:
    name = request.agent.name
    return Item(WAIVER, f"waiver-request-{request.pk}", name,
                f"{request.requested_by.username} asks to waive {request.pointer} for "
                f"{request.duration} ({request.ticket}): {request.reason.strip()[:120]}",
                "medium", request.created_at, request.created_at + sla(WAIVER),
                f"/agents/{name}/#waivers", subject=request)


def _shadow_item(status) -> Item:
    name, request = status.agent.name, status.shadow_request
    try:
        asked = parse_timestamp(request.get("at"))
    except ValueError:
        asked = status.agent.created_at
    return Item(SHADOW, f"shadow-{status.agent_id}-{int(asked.timestamp())}", name,
                f"shadow mode for {request.get('duration', '?')} (asked by "
                f"{request.get('by', '?')}): {request.get('reason', '')[:120]}", "medium",
                asked, asked + sla(SHADOW), f"/agents/{name}/", subject=status)


def _reminder_entry(item: Item) -> Entry:
    return Entry(item.kind, item.key, item.agent, item.waiting_since, item.deadline, item=item)


def reminders_for(user, now: datetime) -> list[Item]:
    """The owner's own reminders: each live agent of theirs whose reminder time has come
    (RECERT_REMIND_DAYS before its review date) and whose recertification is not yet proposed;
    overdue ones are most urgent. The key holds the review date, so a new date is a new item
    (and a new notification), and a reminder is told once per review period."""
    proposed = DesiredStateVersion.objects.filter(agent=OuterRef("pk"),
                                                  state=VersionState.PENDING, recertifies=True)
    lead = timedelta(days=settings.RECERT_REMIND_DAYS)
    agents = (Agent.objects.filter(owner=user, active_version__isnull=False,
                                   review_due_at__lte=now + lead)
              .exclude(lifecycle=Lifecycle.RETIRED).exclude(Exists(proposed))
              .only("pk", "name", "review_due_at").order_by("review_due_at", "pk"))
    return [_reminder_item(agent, now, lead) for agent in agents]


def _reminder_item(agent: Agent, now: datetime, lead: timedelta) -> Item:
    due = agent.review_due_at
    return Item(RECERTIFICATION, f"recertification-{agent.pk}-{int(due.timestamp())}",
                agent.name, f"recertify {agent.name} by {due:%Y-%m-%d %H:%M} UTC",
                "high" if due <= now else "medium", due - lead, due,
                f"/agents/{agent.name}/#recertify-comment")


def _proposal_item(version: DesiredStateVersion) -> Item:
    what = f"proposal #{version.pk} (revision {version.revision}), risk {version.risk}"
    if version.comment.strip():
        what += f": {version.comment.strip()[:120]}"
    return Item(PROPOSAL, f"proposal-{version.pk}", version.agent.name, what,
                _risk_grade(version.risk), version.created_at,
                version.created_at + sla(PROPOSAL), f"/proposals/{version.pk}/",
                version=version)


def decision_summary(request: dict) -> str:
    """What an agent asks to run, in words an approver decides on: the action, the amount as
    money, and the call's own arguments (the order, the customer, the reason), shortened."""
    what = request.get("action") or request.get("tool") or "an action"
    if isinstance(request.get("amount"), int | float) and not isinstance(request["amount"], bool):
        what += f" of {money(request['amount'])}"
    details = [f"{key} {_argument(value)}"
               for key, value in sorted((request.get("arguments") or {}).items())
               if key != "amount" and _argument(value)]
    if details:
        what += f" ({', '.join(details)})"
    return what if len(what) <= _SUMMARY_LIMIT else what[:_SUMMARY_LIMIT - 1] + "…"


_SUMMARY_LIMIT = 200


def _argument(value) -> str:
    """A scalar argument as text; nested values are left to the decision's own page."""
    if isinstance(value, bool) or value is None or isinstance(value, dict | list):
        return ""
    return str(value).strip()[:60]


def _risk_grade(risk: int) -> str:
    """A proposal's risk score (permission_diff.risk_score) as a grade: an action limit
    loosened or two widenings are high, one widening medium, none low."""
    return "high" if risk >= 20 else "medium" if risk >= 10 else "low"


_SEVERITY_RANK = {"high": 3, "medium": 2, "low": 1}


def _escalation_items(rows: list[Escalation]) -> list[Item]:
    items = []
    for members in group(rows):
        first = members[0]
        if first.decision_id is not None:
            decision = first.decision
            deadline = first.opened_at + sla(DECISION)
            if decision.expires_at is not None:
                deadline = min(deadline, decision.expires_at)
            items.append(Item(DECISION, f"escalation-{first.pk}", first.agent.name,
                              f"asks to run {decision_summary(decision.request or {})}",
                              "high", first.opened_at, deadline,
                              f"/escalations/#esc-{first.pk}", _assignee(members),
                              bool(first.acknowledged_at), members))
            continue
        findings = [e.finding for e in members if e.finding is not None]
        severity = max((f.severity for f in findings), key=lambda s: _SEVERITY_RANK.get(s, 0),
                       default="medium")
        kind = INCIDENT if len(members) > 1 else ESCALATION
        agents = sorted({e.agent.name for e in members})
        what = (f"{len(members)} drifts from one change"
                + (f" on {len(agents)} agents ({', '.join(agents)})" if len(agents) > 1 else "")
                + ": " + "; ".join(
                    (f"{e.agent.name} " if len(agents) > 1 else "")
                    + drift_phrase(e.finding.kind, e.finding.pointer, e.finding.expected,
                                   e.finding.actual)
                    for e in members if e.finding is not None)
                if kind == INCIDENT else first.reason)
        items.append(Item(kind, f"escalation-{first.pk}", first.agent.name, what, severity,
                          first.opened_at, first.opened_at + sla(ESCALATION),
                          f"/escalations/#esc-{first.pk}", _assignee(members),
                          all(e.acknowledged_at for e in members), members))
    return items


def _assignee(members: list[Escalation]) -> str:
    names = sorted({e.assignee.username for e in members if e.assignee_id})
    return ", ".join(names)
