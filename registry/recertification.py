"""When an approved desired state must be reviewed again: its risk level, the interval
compliance set for that level (or the settings' default), and the proposer's own date."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from config.durations import duration_seconds, format_duration
from config.errors import DomainError
from config.times import parse_timestamp
from registry.choices import OverdueEffect, RiskLevel
from registry.guardrails import selector_matches
from registry.models import ReviewInterval
from registry.permission_diff import permission_diff, risk_score

MAX_REVIEW_SECONDS = 3650 * 86_400  # ten years
REVIEW_EXPECTED = "a duration such as 30s, 15m, 12h or 90d (at most 3650d)"


def review_seconds(text: Any) -> int:
    """Seconds of a review interval such as 90d (at most 3650d); ValueError otherwise."""
    return duration_seconds(text, at_most=MAX_REVIEW_SECONDS)


def format_seconds(seconds: int) -> str:
    """An interval in its largest exact unit: 7776000 reads 90d."""
    return format_duration(seconds)


@dataclass(frozen=True)
class ReviewOverride:
    """A proposer's review date: after an interval from approval, or by a fixed time."""

    after_seconds: int | None = None
    by: datetime | None = None


def read_override(data: dict[str, Any], now: datetime) -> tuple[ReviewOverride, list[dict]]:
    """`review_after` / `review_by` from a request body: the override and the problems (each
    with its JSON pointer), never both fields at once."""
    after, by = data.get("review_after"), data.get("review_by")
    problems: list[dict] = []
    if after not in (None, "") and by not in (None, ""):
        return ReviewOverride(), [{"pointer": "/review_by",
                                   "message": "give review_after or review_by, not both"}]
    if after not in (None, ""):
        try:
            return ReviewOverride(after_seconds=review_seconds(after)), []
        except ValueError as error:
            problems.append({"pointer": "/review_after", "message": str(error)})
    elif by not in (None, ""):
        try:
            when = parse_timestamp(by)
        except ValueError as error:
            problems.append({"pointer": "/review_by", "message": str(error)})
        else:
            if when <= now:
                problems.append({"pointer": "/review_by", "message": "expected a future time"})
            elif when - now > timedelta(seconds=MAX_REVIEW_SECONDS):
                problems.append({"pointer": "/review_by", "message": "at most 3650 days ahead"})
            else:
                return ReviewOverride(by=when), []
    return ReviewOverride(), problems


def review_override(data: dict[str, Any]) -> ReviewOverride | None:
    """The override in a request body; 400 `invalid_review_date` naming the field."""
    override, problems = read_override(data, timezone.now())
    if problems:
        raise DomainError(problems[0]["message"], code="invalid_review_date", details=problems)
    return override if (override.after_seconds or override.by) else None


def default_intervals() -> dict[str, dict[str, int]]:
    """Every level's interval and lowest risk as the settings give them."""
    return {
        RiskLevel.HIGH: {"seconds": settings.RECERT_REVIEW_DAYS_HIGH * 86_400,
                         "risk_from": settings.RECERT_HIGH_RISK_FROM},
        RiskLevel.MEDIUM: {"seconds": settings.RECERT_REVIEW_DAYS_MEDIUM * 86_400,
                           "risk_from": settings.RECERT_MEDIUM_RISK_FROM},
        RiskLevel.LOW: {"seconds": settings.RECERT_REVIEW_DAYS_LOW * 86_400, "risk_from": 0},
    }


def intervals() -> dict[str, dict[str, int]]:
    """Every level's interval and lowest risk in force: compliance's rows over the defaults."""
    current = default_intervals()
    for row in ReviewInterval.objects.all():
        current[row.level] = {"seconds": row.seconds,
                              "risk_from": 0 if row.level == RiskLevel.LOW else row.risk_from}
    return current


def spec_risk(spec: dict[str, Any]) -> int:
    """The risk of a whole approved spec (as if granted from nothing): what the agent may do,
    not what its last change changed, so a recertification keeps the agent's level."""
    return risk_score(permission_diff(None, spec))


def risk_level(risk: int, table: dict[str, dict[str, int]]) -> str:
    """The highest level whose lowest risk the score reaches."""
    for level in (RiskLevel.HIGH, RiskLevel.MEDIUM):
        if risk >= table[level]["risk_from"]:
            return level
    return RiskLevel.LOW


def policy_seconds(spec: dict[str, Any]) -> int:
    """The review interval the policy gives a spec of this risk (compliance's table)."""
    table = intervals()
    return table[risk_level(spec_risk(spec), table)]["seconds"]


def override_seconds(review: "ReviewOverride | None", now: datetime) -> int | None:
    """A proposer's review date as seconds after `now` (approval), None without one."""
    if review is None:
        return None
    if review.by is not None:
        return max(0, int((review.by - now).total_seconds()))
    return review.after_seconds


def review_date(spec: dict[str, Any], approved_at: datetime, *, after_seconds: int | None,
                by: datetime | None) -> tuple[datetime, str]:
    """The review date of a state approved at `approved_at` and the level it came from
    ("override" when the proposer gave it)."""
    if by is not None:
        return by, "override"
    if after_seconds is not None:
        return approved_at + timedelta(seconds=after_seconds), "override"
    table = intervals()
    level = risk_level(spec_risk(spec), table)
    return approved_at + timedelta(seconds=table[level]["seconds"]), level


EFFECT_RANK = {OverdueEffect.WARN: 0, OverdueEffect.RESTRICT: 1, OverdueEffect.SUSPEND: 2}


def overdue_effect(guardrails: list[Any], labels: dict[str, Any]) -> tuple[str, list[str], str]:
    """What an overdue agent with these labels gets from the enabled guardrails selecting it:
    the strictest effect, the safe tools (those every restricting guardrail names) and the
    guardrail that chose it. No guardrail: warn."""
    chosen = [g for g in guardrails if g.overdue_effect and selector_matches(g.selector, labels)]
    if not chosen:
        return OverdueEffect.WARN, [], ""
    strictest = max(chosen, key=lambda g: EFFECT_RANK[OverdueEffect(g.overdue_effect)])
    safe: list[str] = []
    if strictest.overdue_effect == OverdueEffect.RESTRICT:
        sets = [set(g.safe_tools) for g in chosen if g.overdue_effect == OverdueEffect.RESTRICT]
        safe = sorted(set.intersection(*sets))
    return strictest.overdue_effect, safe, strictest.name
