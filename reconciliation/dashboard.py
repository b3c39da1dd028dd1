"""The cluster overview's figures: counts by health and plotly charts, each from a fixed number
of aggregate queries whatever the number of agents, findings or audit rows."""

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Min, Q
from django.db.models.functions import TruncHour
from django.utils import timezone

from reconciliation.charts import bar, count_axis, figure, scatter
from reconciliation.choices import Health
from reconciliation.finding_times import (
    DRIFT_ONLY,
    DRIFT_STARTED,
    FIXED_THIS_OCCURRENCE,
    OBSERVED_IN_ORDER,
)
from reconciliation.models import AgentStatus, BreakerTrip, ControlState, Escalation, Finding
from registry.choices import Lifecycle
from registry.models import Agent

SEVERITIES = ("high", "medium", "low")
AGE_BUCKETS = [("< 5 min", timedelta(minutes=5)), ("< 1 h", timedelta(hours=1)),
               ("< 1 day", timedelta(days=1)), ("older", None)]
LAYOUT = {"margin": {"l": 40, "r": 10, "t": 30, "b": 40}, "height": 260,
          "legend": {"orientation": "h"}, "font": {"size": 12},
          "xaxis": {"nticks": 8}, "yaxis": {"rangemode": "tozero"}}


def health_counts() -> dict[str, int]:
    """How many approved agents are in each health state."""
    counts = {h.value: 0 for h in Health}
    # COUNT(*), not COUNT(id): read from the health index alone, not from every status row
    for row in AgentStatus.objects.values("health").annotate(n=Count("*")):
        counts[row["health"]] = row["n"]
    # a retired agent counts as retired (never in policy), not among the live ones
    live = Agent.objects.filter(active_version__isnull=False).exclude(
        lifecycle=Lifecycle.RETIRED).count()
    counted = sum(n for health, n in counts.items() if health != Health.RETIRED)
    counts[Health.UNKNOWN] += max(0, live - counted)
    return counts


def _hours(now: datetime) -> list[datetime]:
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=23)
    return [start + timedelta(hours=i) for i in range(24)]


def _began(now: datetime) -> datetime:
    """The hour the cluster's history begins (its first agent, or an older finding carried
    over): before it nothing was measured, and a chart shows no value there (a gap), never an
    invented zero."""
    firsts = [Agent.objects.aggregate(first=Min("created_at"))["first"],
              Finding.objects.aggregate(first=Min("detected_at"))["first"]]
    first = min((t for t in firsts if t is not None), default=now)
    return first.replace(minute=0, second=0, microsecond=0)


def _measured(hours: list[datetime], began: datetime, values: list) -> list:
    return [value if hour >= began else None for hour, value in zip(hours, values, strict=True)]


def drift_over_time(now: datetime) -> dict[str, Any]:
    """Drift found and corrected per hour over the last day, by severity."""
    hours = _hours(now)
    since = hours[0]
    found = {(r["hour"], r["severity"]): r["n"] for r in Finding.objects.filter(
        DRIFT_ONLY, detected_at__gte=since).annotate(hour=TruncHour("detected_at")).values(
        "hour", "severity").annotate(n=Count("pk"))}
    fixed = {r["hour"]: r["n"] for r in Finding.objects.filter(
        DRIFT_ONLY, FIXED_THIS_OCCURRENCE, corrected_at__gte=since).annotate(
        hour=TruncHour("corrected_at")).values("hour").annotate(n=Count("pk"))}
    labels = [h.strftime("%H:00") for h in hours]
    began = _began(now)
    series = {f"found: {severity}": _measured(hours, began, [found.get((h, severity), 0)
                                                               for h in hours])
              for severity in SEVERITIES}
    corrected = _measured(hours, began, [fixed.get(h, 0) for h in hours])
    stacked = [sum(v or 0 for v in column) for column in zip(*series.values(), strict=True)]
    return figure(
        {**LAYOUT, "title": "Drift per hour: found and corrected (last 24 h)",
         "barmode": "stack",
         "yaxis": count_axis("findings", stacked + [v or 0 for v in corrected])},
        *(bar(name=name, x=labels, y=counts,
              hovertemplate="%{x}: %{y:d} found<extra>%{fullData.name}</extra>")
          for name, counts in series.items()),
        scatter(name="corrected (verified)", x=labels, y=corrected, mode="lines+markers",
                hovertemplate="%{x}: %{y:d} corrected<extra></extra>"))


def _seconds(value: timedelta | None) -> float | None:
    """Seconds for the chart; None (a gap, not a 0 s point) when nothing happened that hour."""
    return None if value is None else round(max(value.total_seconds(), 0.0), 3)


def response_times(now: datetime) -> dict[str, Any]:
    """Mean time to detect and to a verified correction per hour, both measured from the
    drifting event (the observation's own time), for drift detected that hour (rollouts of
    approved generations are not drift)."""
    hours = _hours(now)
    detect = ExpressionWrapper(F("detected_at") - DRIFT_STARTED, output_field=DurationField())
    verify = ExpressionWrapper(F("corrected_at") - DRIFT_STARTED, output_field=DurationField())
    rows = {r["hour"]: r for r in Finding.objects.filter(
            DRIFT_ONLY, detected_at__gte=hours[0]).annotate(
        hour=TruncHour("detected_at")).values("hour").annotate(
        detect=Avg(detect, filter=OBSERVED_IN_ORDER & Q(observed_at__isnull=False)),
        verify=Avg(verify, filter=OBSERVED_IN_ORDER & FIXED_THIS_OCCURRENCE))}
    labels = [h.strftime("%H:00") for h in hours]
    return figure(
        {**LAYOUT, "title": "Mean seconds from drift to detection / to fix",
         "yaxis": {"title": {"text": "seconds"}, "rangemode": "tozero"}},
        scatter(name="to detect", x=labels, mode="lines+markers", connectgaps=False,
                y=[_seconds(rows.get(h, {}).get("detect")) for h in hours],
                hovertemplate="%{x}: %{y:.1f} s to detect<extra></extra>"),
        scatter(name="to verified correction", x=labels, mode="lines+markers",
                connectgaps=False, y=[_seconds(rows.get(h, {}).get("verify")) for h in hours],
                hovertemplate="%{x}: %{y:.1f} s to verified correction<extra></extra>"))


def escalations_by_age(now: datetime) -> dict[str, Any]:
    """Open escalations by how long they have waited."""
    filters = {}
    lower = None
    for index, (_, span) in enumerate(AGE_BUCKETS):
        condition = Q()
        if span is not None:
            condition &= Q(opened_at__gt=now - span)
        if lower is not None:
            condition &= Q(opened_at__lte=now - lower)
        filters[f"bucket_{index}"] = Count("pk", filter=condition)
        lower = span
    counts = Escalation.objects.filter(status="open").aggregate(**filters)
    ages = [counts[f"bucket_{i}"] for i in range(len(AGE_BUCKETS))]
    return figure(
        {**LAYOUT, "title": f"Open escalations by age ({sum(ages)} open)",
         "yaxis": count_axis("open escalations", ages)},
        bar(x=[label for label, _ in AGE_BUCKETS], y=ages, name="open escalations",
            hovertemplate="%{x}: %{y:d} open escalations<extra></extra>"))


def summary(now: datetime | None = None) -> dict[str, Any]:
    """Everything the overview shows (also served as JSON for live updates)."""
    now = now or timezone.now()
    control = ControlState.load()
    return {
        "at": now.isoformat(),
        "health": health_counts(),
        "post_convergence_drift": control.post_convergence_drift,
        "breaker": {"tripped_at": control.breaker_tripped_at.isoformat()
                    if control.breaker_tripped_at else None, "reason": control.breaker_reason},
        # an owner's or a team's breaker: only their agents wait (like health, shown to all)
        "breakers": [trip.to_dict() for trip in BreakerTrip.objects.order_by("scope")],
        "shadow": control.shadow,
        "open_escalations": Escalation.objects.filter(status="open").count(),
        "charts": {"drift": drift_over_time(now), "response": response_times(now),
                   "escalations": escalations_by_age(now)},
    }
