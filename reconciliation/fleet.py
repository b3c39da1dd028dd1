"""The fleet view for compliance: every rule with the agents it covers, its current
violations and a 7-day trend, the agents no rule covers at all, and silence over time.

Each rule kind is a row source: a function from the loaded fleet to rows, in ROW_SOURCES
(guardrails and toxic combinations here; group rules and group budgets, and the agents' own
token and cost budgets, registered by runtime). A rule that asks for more sign-off (step-up,
two approvers) is a requirement met by approval, not a breach: the agents it applied to are
listed apart from its violations. Every source reads the fleet from `Fleet` (loaded once) and
makes a fixed number of queries of its own, so the view costs the same number of queries for
ten agents or ten thousand. It still reads and judges every agent: the workers compute it and
pages read the stored result (reconciliation/fleet_snapshot.py).
"""

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from reconciliation.charts import bar, count_axis, figure, scatter
from reconciliation.choices import OPEN_STATUSES, TOXIC_PATH_KIND
from reconciliation.models import Finding, ObservedState, Silence
from reconciliation.timeline_chart import fleet_timelines, timeline_figure
from registry.choices import GuardrailEffect, GuardrailOutcome, Lifecycle, ToxicEffect
from registry.guardrails import compile_expression, selector_matches
from registry.models import Agent, DesiredStateVersion, Guardrail, ToxicCombination
from registry.toxic import Capability, ToxicPath, toxic_paths

TREND_DAYS = 7
MAX_NAMES = 50  # agents named per cell; the counts are always whole
# Effects that ask for more sign-off, not a refusal: an approved spec that fails such a rule
# was approved with that sign-off, which is the rule met, not broken.
REQUIREMENTS = {GuardrailEffect.STEP_UP, GuardrailEffect.REQUIRE_APPROVALS,
                ToxicEffect.REQUIRE_APPROVALS}


@dataclass
class Fleet:
    """Every live agent with its approved spec and metadata, loaded once for all sources."""

    now: datetime
    agents: dict[str, dict[str, Any]]  # name -> {"labels", "owner", "spec"}
    days: list[datetime]

    @classmethod
    def load(cls, now: datetime | None = None) -> "Fleet":
        now = now or timezone.now()
        rows = (Agent.objects.exclude(lifecycle=Lifecycle.RETIRED)
                .filter(active_version__isnull=False)
                .values_list("name", "labels", "owner__username", "description",
                             "active_version__spec"))
        agents = {name: {"labels": labels or {}, "owner": owner, "description": description,
                         "spec": spec} for name, labels, owner, description, spec in rows}
        today = now.replace(hour=0, minute=0, second=0, microsecond=0)
        days = [today - timedelta(days=TREND_DAYS - 1 - i) for i in range(TREND_DAYS)]
        return cls(now, agents, days)

    @cached_property
    def rules(self) -> list[ToxicCombination]:
        return list(ToxicCombination.objects.filter(enabled=True).order_by("name"))

    @cached_property
    def approved_paths(self) -> list[ToxicPath]:
        """The toxic paths of the approved fleet (the toxic page and the rows share them)."""
        if not self.rules:
            return []
        return toxic_paths({name: a["spec"] for name, a in self.agents.items()}, self.rules)

    @cached_property
    def observed_paths(self) -> list[ToxicPath]:
        """The toxic paths of what agents really run with."""
        return toxic_paths(ObservedState.latest_by_name(), self.rules) if self.rules else []

    def day_index(self, when: datetime) -> int | None:
        index = (when - self.days[0]).days
        return index if 0 <= index < TREND_DAYS else None


@dataclass
class FleetRow:
    """One rule as the fleet view shows it."""

    kind: str  # guardrail | toxic_combination | (group_rule ...)
    name: str
    effect: str
    description: str
    covers: list[str]
    violations: list[str]  # agents that break it now
    trend: list[int]  # violations found per day, oldest first
    link: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    # agents a requirement (step-up, more approvers) applied to: met by approval, not broken
    met_by_approval: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "effect": self.effect,
                "description": self.description, "covers_count": len(self.covers),
                "covers": self.covers[:MAX_NAMES], "violations_count": len(self.violations),
                "violations": self.violations[:MAX_NAMES], "trend": self.trend,
                "link": self.link, "requirement": self.effect in REQUIREMENTS,
                "met_by_approval_count": len(self.met_by_approval),
                "met_by_approval": self.met_by_approval[:MAX_NAMES], **self.detail}


def _failing(guardrail: Guardrail, program: Any, agent: dict[str, Any], name: str,
             now: datetime) -> bool:
    """The agent's approved spec fails the guardrail now (or cannot be judged: fail closed)."""
    metadata = {"name": name, "owner": agent["owner"], "labels": agent["labels"],
                "description": agent["description"]}
    try:
        return program.execute({"spec": agent["spec"], "metadata": metadata, "now": now}) \
            is not True
    except Exception:  # noqa: BLE001 - cannot be judged: shown as a violation, never a 500
        return True


def guardrail_rows(fleet: Fleet) -> list[FleetRow]:
    """Each enabled guardrail: the agents its selector picks, the approved specs that fail it
    now, and the proposals it stopped or flagged per day (two queries)."""
    guardrails = list(Guardrail.objects.filter(enabled=True).order_by("name"))
    flagged: dict[str, list[int]] = defaultdict(lambda: [0] * TREND_DAYS)
    for created, results in DesiredStateVersion.objects.filter(
            created_at__gte=fleet.days[0]).values_list("created_at", "guardrail_results"):
        index = fleet.day_index(created)
        for result in results or []:
            if index is not None and result.get("outcome") != GuardrailOutcome.PASSED:
                flagged[result.get("guardrail", "")][index] += 1
    rows = []
    for guardrail in guardrails:
        covers = sorted(name for name, agent in fleet.agents.items()
                        if selector_matches(guardrail.selector, agent["labels"]))
        try:
            program = compile_expression(guardrail.expression)
            failing = [name for name in covers
                       if _failing(guardrail, program, fleet.agents[name], name, fleet.now)]
        except Exception:  # noqa: BLE001 - an expression that no longer compiles
            failing = covers
        requirement = guardrail.effect in REQUIREMENTS
        rows.append(FleetRow("guardrail", guardrail.name, guardrail.effect,
                             guardrail.description or guardrail.message, covers,
                             [] if requirement else failing,
                             [0] * TREND_DAYS if requirement else flagged[guardrail.name],
                             "/guardrails/", {"selector": guardrail.selector},
                             failing if requirement else []))
    return rows


def toxic_rows(fleet: Fleet) -> list[FleetRow]:
    """Each enabled toxic combination: the agents holding either side, the agents on a path
    now (approved or observed) and the observed paths found per day (three queries)."""
    if not fleet.rules:
        return []
    on_path: dict[str, set[str]] = defaultdict(set)  # a violation: observed, or refused
    approved_on_path: dict[str, set[str]] = defaultdict(set)
    for path in fleet.approved_paths:
        approved_on_path[path.rule].update(path.agents)
    for path in fleet.observed_paths:
        on_path[path.rule].update(path.agents)
    found: dict[str, list[int]] = defaultdict(lambda: [0] * TREND_DAYS)
    for pointer, detected in Finding.objects.filter(
            kind=TOXIC_PATH_KIND, detected_at__gte=fleet.days[0]).values_list("pointer",
                                                                          "detected_at"):
        index = fleet.day_index(detected)
        if index is not None:
            found[pointer.removeprefix("/toxic/")][index] += 1
    rows = []
    for rule in fleet.rules:
        sides = (Capability.parse(rule.left), Capability.parse(rule.right))
        covers = sorted(name for name, agent in fleet.agents.items()
                        if any(side.held_by(agent["spec"]) for side in sides))
        # an approved path under require_approvals was approved with those approvals
        met = (approved_on_path[rule.name] - on_path[rule.name]
               if rule.effect in REQUIREMENTS else set())
        broken = on_path[rule.name] | (approved_on_path[rule.name] - met)
        rows.append(FleetRow("toxic_combination", rule.name, rule.effect, rule.description,
                             covers, sorted(broken), found[rule.name], "/toxic/",
                             {"left": rule.left, "right": rule.right}, sorted(met)))
    return rows


def open_and_found(fleet: Fleet, kind: str) -> tuple[dict[str, set[str]],
                                                      dict[str, list[int]]]:
    """Per pointer: the agents with an open finding of `kind` there, and the findings found
    there per day (one query)."""
    open_: dict[str, set[str]] = defaultdict(set)
    found: dict[str, list[int]] = defaultdict(lambda: [0] * TREND_DAYS)
    for pointer, name, status, detected in Finding.objects.filter(kind=kind).filter(
            Q(status__in=OPEN_STATUSES) | Q(detected_at__gte=fleet.days[0])).values_list(
            "pointer", "agent__name", "status", "detected_at"):
        if status in OPEN_STATUSES and name in fleet.agents:
            open_[pointer].add(name)
        if (index := fleet.day_index(detected)) is not None:
            found[pointer][index] += 1
    return open_, found


# The rule kinds the view shows, in order: the registry's rules here, then the sources an app
# above the loop registers from its AppConfig.ready (runtime: group rules and budgets,
# runtime/fleet_rows.py).
ROW_SOURCES: list[Callable[[Fleet], list[FleetRow]]] = [guardrail_rows, toxic_rows]


def register_rows(source: Callable[[Fleet], list[FleetRow]]) -> None:
    """Add a kind of rule to the view, after those already there (once per process)."""
    if source not in ROW_SOURCES:
        ROW_SOURCES.append(source)


def silence_now_and_over_time(fleet: Fleet) -> tuple[list[dict[str, Any]], int,
                                                     dict[str, Any]]:
    """The agents silent now (the longest silent first, at most MAX_NAMES), how many, and a
    chart of how many were silent each hour of the last day (one query)."""
    start = fleet.now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=23)
    hours = [start + timedelta(hours=i) for i in range(24)]
    silences = list(Silence.objects.filter(started_at__lte=fleet.now).exclude(
        ended_at__lt=start).order_by("started_at"))
    counts = [sum(1 for s in silences if s.started_at < hour + timedelta(hours=1)
                  and (s.ended_at is None or s.ended_at >= hour)) for hour in hours]
    chart = figure({"margin": {"l": 40, "r": 10, "t": 30, "b": 40}, "height": 240,
                    "title": "Silent agents (last 24 h)", "yaxis": count_axis("agents", counts)},
                   bar(name="silent", x=[h.strftime("%H:00") for h in hours], y=counts))
    silent = [s for s in silences if s.ended_at is None]
    return [s.to_dict() for s in silent[:MAX_NAMES]], len(silent), chart


def open_findings() -> tuple[dict[str, int], int]:
    """The agents with the most open findings (at most MAX_NAMES, by name) and how many
    agents have any (two queries)."""
    rows = Finding.objects.filter(status__in=OPEN_STATUSES, agent__active_version__isnull=False
                                  ).exclude(agent__lifecycle=Lifecycle.RETIRED)
    top = (rows.values("agent__name").annotate(n=Count("pk"))
           .order_by("-n", "agent__name").values_list("agent__name", "n")[:MAX_NAMES])
    return dict(sorted(top)), rows.values("agent_id").distinct().count()


def fleet_view(now: datetime | None = None) -> dict[str, Any]:
    """Everything the fleet page and `GET /api/v1/fleet` show."""
    return view_of(Fleet.load(now))


def view_of(fleet: Fleet) -> dict[str, Any]:
    """The fleet view of a loaded fleet: every list of agent names at most MAX_NAMES long,
    with its whole count beside it."""
    rows = [row for source in ROW_SOURCES for row in source(fleet)]
    covered = {name for row in rows for name in row.covers}
    uncovered = sorted(name for name in fleet.agents if name not in covered)
    with_findings, findings_agents = open_findings()
    silent, silent_count, chart = silence_now_and_over_time(fleet)
    days = [d.strftime("%m-%d") for d in fleet.days]
    trend = figure({"margin": {"l": 40, "r": 10, "t": 30, "b": 40}, "height": 260,
                    "title": f"Violations found per day (last {TREND_DAYS} days)",
                    "legend": {"orientation": "h"},
                    # The days are the axis even with no rule to plot (an empty date axis
                    # once read "23:59:59.9995, Jan 1 2012").
                    "xaxis": {"type": "category", "categoryorder": "array",
                              "categoryarray": days, "range": [-0.5, len(days) - 0.5]},
                    "yaxis": count_axis("violations", [n for row in rows for n in row.trend]),
                    "annotations": [] if rows else [{
                        "text": "No rule yet",
                        "showarrow": False, "xref": "paper", "yref": "paper",
                        "x": 0.5, "y": 0.5}]},
                   *(scatter(name=f"{row.kind}: {row.name}", mode="lines+markers",
                             x=days, y=row.trend)
                     for row in rows))
    timelines, counts = fleet_timelines(fleet.now, timedelta(days=TREND_DAYS))
    compliance = timeline_figure(
        timelines, now=fleet.now, span=timedelta(days=TREND_DAYS),
        title=f"Agents out of policy: {counts['out_of_policy']} of {counts['agents']} "
              f"(last {TREND_DAYS} days, {len(timelines)} drawn)")
    return {
        "at": fleet.now.isoformat(),
        "agents": len(fleet.agents),
        "rules": [row.to_dict() for row in rows],
        "uncovered": uncovered[:MAX_NAMES],
        "uncovered_count": len(uncovered),
        "open_findings": with_findings,
        "open_findings_agents": findings_agents,
        "silent": silent,
        "silent_count": silent_count,
        "compliance": counts,
        "charts": {"trend": trend, "silence": chart,
                   "compliance": compliance},
    }
