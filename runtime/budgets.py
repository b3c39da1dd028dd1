"""Per-agent token and cost budgets (the spec's `budgets`), as pure functions: the budget
windows an event spends in, and what a window's total means: at 80% a warning (recorded and
alerted, nothing enforced), above 100% a broken rule the spec's behaviour enforcement handles
(block, escalate, log or correct). Windows are sums in Redis, counted by the group-window
script in the same pipeline as every other window."""

from typing import Any

from registry.manifest import duration_seconds
from runtime.behaviour import Violation
from runtime.group_rules import GroupCheck

WARN_SHARE = 0.8
WARNING_AREA = "warning"  # recorded and alerted only, whatever the spec's enforcement


def spent(event: Any, kind: str) -> float | None:
    """What an event spends of a budget kind (None: nothing reported)."""
    if kind == "tokens":
        tokens = (event.input_tokens, event.output_tokens)
        return None if tokens == (None, None) else float(sum(t or 0 for t in tokens))
    return event.cost


def budget_checks(spec: dict[str, Any], event: Any, agent_id: int
                  ) -> list[tuple[GroupCheck, int]]:
    """The (budget window, index in spec.budgets) an event spends in."""
    found = []
    for index, budget in enumerate(spec.get("budgets", [])):
        kind = "tokens" if "tokens" in budget else "cost"
        value = spent(event, kind)
        if not value or value < 0:
            continue
        seconds = duration_seconds(budget["per"])
        found.append((GroupCheck(0, f"bb:{agent_id}:{kind}:{seconds}", "agent", seconds,
                                 budget[kind] * WARN_SHARE, kind, value,
                                 f"{agent_id}|{event.id}|{value!r}"), index))
    return found


def _amount(kind: str, value: float) -> str:
    if kind == "cost":
        return f"${value:,.2f}"
    return f"{value:,.0f} tokens"


def budget_violation(spec: dict[str, Any], index: int, total: float,
                     event_id: str) -> Violation | None:
    """A budget window's total once this event is in: above the budget, broken; at 80% or
    more, a warning; else nothing."""
    budget = spec["budgets"][index]
    kind = "tokens" if "tokens" in budget else "cost"
    most, per = budget[kind], budget["per"]
    seconds = duration_seconds(per)
    pointer = f"/budgets/{index}/{kind}"
    total = int(total) if float(total).is_integer() else round(total, 6)
    if total > most:
        return Violation("budget_exceeded", pointer, most, total, "behaviour", event_id,
                         f"{kind} budget of {_amount(kind, most)} per {per} spent: "
                         f"{_amount(kind, total)}", window_seconds=seconds)
    if total >= most * WARN_SHARE:
        return Violation("budget_warning", pointer, most, total, WARNING_AREA, event_id,
                         f"{_amount(kind, total)} of the {kind} budget of "
                         f"{_amount(kind, most)} per {per} spent (80% or more)",
                         window_seconds=seconds)
    return None
