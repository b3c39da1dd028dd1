"""Compliance timelines as plotly charts: one row per agent on a real time axis (24 h and 7 d
visibly different), each interval hoverable with its reason; the fleet's chart puts the agents
out of policy (at most FLEET_ROWS) on one chart, with counts, from a fixed number of
queries."""

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Min, Q

from audit.models import AuditEntry
from reconciliation.charts import bar, figure
from reconciliation.choices import OPEN_STATUSES
from reconciliation.compare import TRANSITIONS, Segment, Transition, timeline
from reconciliation.models import Finding, ReconcileRun
from registry.choices import Lifecycle
from registry.models import Agent

STATES = ((True, "in policy", "#067647"), (False, "out of policy", "#b42318"),
          (None, "not known", "#8c959f"))
FLEET_ROWS = 60  # agents drawn on the fleet chart: out of policy first, then most changed


def _hover(name: str, segment: Segment) -> str:
    span = f"{segment.start:%Y-%m-%d %H:%M} – {segment.end:%Y-%m-%d %H:%M} UTC"
    hours = (segment.end - segment.start).total_seconds() / 3600
    # no <b>: plotly styles it through a style attribute, which the CSP refuses
    return f"{name}: {segment.label}<br>{span} ({hours:.1f} h)"


def timeline_figure(rows: list[tuple[str, list[Segment]]], *, now: datetime,
                    span: timedelta, title: str) -> dict[str, Any]:
    """Horizontal bars from each interval's start, one row per agent, coloured by state."""
    traces = []
    for state, label, colour in STATES:
        chosen = [(name, s) for name, segments in rows for s in segments
                  if s.in_policy is state]
        traces.append(bar(
            name=label, orientation="h", marker={"color": colour},
            y=[name for name, _ in chosen], base=[s.start.isoformat() for _, s in chosen],
            x=[(s.end - s.start).total_seconds() * 1000 for _, s in chosen],
            hovertext=[_hover(name, s) for name, s in chosen], hoverinfo="text",
            showlegend=True))
    return figure({
        "title": title, "barmode": "overlay", "margin": {"l": 120, "r": 10, "t": 30, "b": 40},
        "height": 120 + 28 * len(rows), "legend": {"orientation": "h"},
        "xaxis": {"type": "date", "range": [(now - span).isoformat(), now.isoformat()],
                  "title": {"text": "time (UTC)"}},
        "yaxis": {"autorange": "reversed", "type": "category"}}, *traces)


def fleet_timelines(now: datetime, span: timedelta) -> tuple[list[tuple[str, list[Segment]]],
                                                         dict[str, int]]:
    """The fleet chart's rows and counts: the agents out of policy now (open findings or
    suspended) first, then those whose state changed most in the span, then the rest by
    name, at most FLEET_ROWS; and how many approved agents there are and how many are out of
    policy. At most eight queries whatever the fleet, and none reads every agent."""
    # a retired agent is no longer judged: not a row, not counted (never "in policy")
    approved = Agent.objects.filter(active_version__isnull=False).exclude(
        lifecycle=Lifecycle.RETIRED)
    steps: dict[str, list[Transition]] = {}
    for at, action, target, before, agent in AuditEntry.objects.filter(
            at__gt=now - span, action__in=TRANSITIONS).order_by("-seq").values_list(
            "at", "action", "target", "before", "agent")[:20_000]:
        steps.setdefault(agent, []).append(
            Transition(at, action, target, (before or {}).get("status")))
    out = approved.filter(Q(lifecycle=Lifecycle.SUSPENDED) | Q(
        pk__in=Finding.objects.filter(status__in=OPEN_STATUSES).values("agent_id")))
    counts = {"agents": approved.count(), "out_of_policy": out.count()}
    chosen = list(out.order_by("name").values_list("name", "lifecycle", "pk")[:FLEET_ROWS])
    if len(chosen) < FLEET_ROWS:
        busiest = sorted(steps, key=lambda name: (-len(steps[name]), name))
        taken = {name for name, _, _ in chosen}
        more = approved.filter(name__in=[n for n in busiest if n not in taken][:FLEET_ROWS])
        chosen += sorted(more.values_list("name", "lifecycle", "pk"),
                         key=lambda a: (-len(steps[a[0]]), a[0]))[:FLEET_ROWS - len(chosen)]
    if len(chosen) < FLEET_ROWS:  # a small fleet: every agent fits
        chosen += approved.exclude(name__in=[name for name, _, _ in chosen]).order_by(
            "name").values_list("name", "lifecycle", "pk")[:FLEET_ROWS - len(chosen)]
    pks = [pk for _, _, pk in chosen]
    first_runs = dict(ReconcileRun.objects.filter(agent_id__in=pks).values("agent_id")
                      .annotate(first=Min("started_at")).values_list("agent_id", "first"))
    open_by_agent: dict[int, set[int]] = {}
    for pk, agent_id in Finding.objects.filter(status__in=OPEN_STATUSES,
                                               agent_id__in=pks).values_list("pk", "agent_id"):
        open_by_agent.setdefault(agent_id, set()).add(pk)
    rows = []
    for name, lifecycle, pk in sorted(chosen, key=lambda a: a[0]):
        mine = steps.get(name, [])
        known = [t for t in (first_runs.get(pk), mine[-1].at if mine else None) if t]
        rows.append((name, timeline(
            now=now, span=span, judged_since=min(known) if known else None,
            open_findings=open_by_agent.get(pk, set()),
            suspended=lifecycle == Lifecycle.SUSPENDED, transitions=mine)))
    return rows, counts
