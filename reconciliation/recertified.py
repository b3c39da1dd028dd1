"""The Recertified condition: True while the approved state's review date is ahead, False
(reason ReviewOverdue) once it passed unrecertified. Pure: the caller reads the dates."""

from datetime import datetime
from typing import Any

from reconciliation.choices import ConditionType
from reconciliation.conditions import condition


def recertified_condition(previous: list[dict[str, Any]], *, due: datetime | None,
                          overdue: bool, generation: int, now: datetime) -> dict[str, Any] | None:
    """The condition for these dates (None before the first approval gives a date)."""
    if due is None:
        return None
    before = next((c for c in previous if c["type"] == ConditionType.RECERTIFIED), None)
    when = f"{due:%Y-%m-%d %H:%M} UTC"
    if overdue:
        return condition(ConditionType.RECERTIFIED, False, "ReviewOverdue",
                         f"review was due by {when}; propose a recertification", generation,
                         before, now)
    return condition(ConditionType.RECERTIFIED, True, "ReviewScheduled",
                     f"next review due by {when}", generation, before, now)


def with_recertified(conditions: list[dict[str, Any]], agent: Any,
                     now: datetime) -> list[dict[str, Any]]:
    """`conditions` with the agent's Recertified condition replaced (or added), at the
    generation the others were computed for (one status, one observedGeneration: written at
    an approval, before the pass for the new generation ran)."""
    observed = next((c["observedGeneration"] for c in conditions
                     if c["type"] != ConditionType.RECERTIFIED), agent.generation)
    return merge(conditions, recertified_condition(
        conditions, due=agent.review_due_at, overdue=agent.overdue_at is not None,
        generation=observed, now=now))


def merge(conditions: list[dict[str, Any]], row: dict[str, Any] | None) -> list[dict[str, Any]]:
    others = [c for c in conditions if c["type"] != ConditionType.RECERTIFIED]
    return others if row is None else [*others, row]
