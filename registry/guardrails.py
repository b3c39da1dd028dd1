"""Guardrail expressions (CEL over `spec`, `metadata` and `now`): checking and evaluating.

As in Kubernetes admission policies, an expression states what must hold: true passes, false
applies the guardrail's effect. Anything that cannot be evaluated fails closed.
"""

import re
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.conf import settings

from registry.choices import GuardrailEffect, GuardrailOutcome
from registry.guardrail_cost import CostUnknown, estimate_cost, largest_collection, parse

MAX_EXPRESSION = 4000
# The most items a list or map of a spec may hold under the manifest schema (tools, data,
# limits and actions: 200 each); a saved expression must fit the budget at that size.
SCHEMA_MAX_ITEMS = 200
_POSITION = re.compile(r"<input>:(\d+):(\d+): (.*)")

# A spec every well-formed expression can be tried on when it is saved.
SAMPLE_SPEC: dict[str, Any] = {
    "framework": "custom", "connector": {"type": "sandbox"}, "model": "m", "version": "1",
    "tools": ["orders.lookup"], "data": [{"resource": "orders_db", "access": "read"}],
    "actions": {"payments.refund": {"approval_above": 500, "max": 5000}},
    "limits": [{"resource": "customers_db", "max_calls": 40, "per": "1h"}],
    "grants": [{"resource": "crm", "access": "read", "expires_at": "2026-12-04T00:00:00Z",
                "reason": "sample"}],
    "enforcement": {"default": "correct", "config": "correct", "actions": "correct",
                    "behaviour": "correct"},
}
SAMPLE_METADATA = {"name": "sample", "owner": "sample", "labels": {}, "description": ""}


class ExpressionError(ValueError):
    """A guardrail expression that cannot be saved, with the parser's message and position."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        self.message, self.line, self.column = message, line, column
        where = f" at line {line}, column {column}" if line else ""
        super().__init__(f"{message}{where}")


class ExpressionTooCostly(ExpressionError):
    """A well-formed expression whose worst case is over GUARDRAIL_COST_BUDGET."""


def cost_problem(expression: str, largest: int) -> str | None:
    """Why evaluating the expression on data whose lists and maps hold at most `largest` items
    could take too long, or None when it fits the budget."""
    budget = settings.GUARDRAIL_COST_BUDGET
    try:
        cost = estimate_cost(parse(expression), largest_collection=largest)
    except CostUnknown as error:
        return f"its cost cannot be estimated ({error})"
    if cost <= budget:
        return None
    return (f"its estimated worst-case cost is {cost:,} steps with {largest} items per list, "
            f"over the budget of {budget:,}: each comprehension (all, exists, exists_one, map, "
            "filter) multiplies the cost of what it holds by the size of its list, so "
            "comprehensions nested inside each other (or over lists joined with +) grow fast")


def compile_expression(expression: str) -> Any:
    """`expression` compiled by the CEL library (raises ValueError when it does not parse)."""
    import cel  # heavy: its package imports its own command line (typer, rich, prompt_toolkit)

    return cel.compile(expression)


def check_expression(expression: str, now: datetime) -> None:
    """Refuse an expression that does not parse, names unknown variables or functions, or is
    not a boolean; evaluation errors that depend on the spec are allowed (they fail closed)."""
    if not expression.strip():
        raise ExpressionError("the expression is empty")
    if len(expression) > MAX_EXPRESSION:
        raise ExpressionError(f"the expression is longer than {MAX_EXPRESSION} characters")
    try:
        program = compile_expression(expression)
    except ValueError as error:
        text = str(error)
        match = _POSITION.search(text)
        if match:
            raise ExpressionError(match.group(3).strip(), int(match.group(1)),
                                  int(match.group(2))) from None
        raise ExpressionError(text) from None
    problem = cost_problem(expression, SCHEMA_MAX_ITEMS)
    if problem:
        raise ExpressionTooCostly(f"the expression is too costly: {problem}")
    try:
        result = program.execute({"spec": SAMPLE_SPEC, "metadata": SAMPLE_METADATA, "now": now})
    except RuntimeError as error:
        # Undefined names surface here: the sample binds every variable an expression may use.
        raise ExpressionError(
            f"{str(error).split('. ')[0]}; expressions see spec, metadata and now") from None
    except Exception:  # noqa: BLE001 - index, type, division, overflow: the spec's shape decides
        return  # evaluation fails closed when it happens on a real proposal
    if not isinstance(result, bool):
        raise ExpressionError(f"the expression must be a boolean; it gave {type(result).__name__}")


def selector_matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """Label-equality selection: every selector label must be on the agent ({} selects all)."""
    return all(labels.get(key) == value for key, value in selector.items())


@dataclass(frozen=True)
class GuardrailResult:
    """One guardrail's verdict on one proposal."""

    guardrail: str
    effect: str
    outcome: str
    message: str
    required_approvals: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(guardrail: Any, spec: dict, metadata: dict, now: datetime) -> GuardrailResult:
    """Evaluate one guardrail (any object with name, expression, effect, message,
    required_approvals); errors fail closed with outcome `error`. An expression over the cost
    budget for this spec's sizes (one saved before the budget, or a spec with more items than
    the sample) is not run at all: it would hold the whole process while it ran."""
    problem = cost_problem(guardrail.expression, largest_collection([spec, metadata]))
    if problem:
        return GuardrailResult(guardrail.name, guardrail.effect, GuardrailOutcome.ERROR,
                               f"not evaluated, so the proposal is held: {problem}")
    try:
        passed = compile_expression(guardrail.expression).execute(
            {"spec": spec, "metadata": metadata, "now": now})
        if not isinstance(passed, bool):
            raise TypeError(f"the expression gave {type(passed).__name__}, not a boolean")
    except Exception as error:  # noqa: BLE001 - any failure holds the proposal, never a 500
        return GuardrailResult(guardrail.name, guardrail.effect, GuardrailOutcome.ERROR,
                               f"could not be evaluated, so the proposal is held: {error}")
    if passed:
        return GuardrailResult(guardrail.name, guardrail.effect, GuardrailOutcome.PASSED, "")
    outcome = {
        GuardrailEffect.DENY: GuardrailOutcome.DENIED,
        GuardrailEffect.REQUIRE_APPROVALS: GuardrailOutcome.REQUIRES_APPROVALS,
        GuardrailEffect.WARN: GuardrailOutcome.WARNED,
        GuardrailEffect.STEP_UP: GuardrailOutcome.REQUIRES_STEP_UP,
    }[GuardrailEffect(guardrail.effect)]
    needs_more = outcome == GuardrailOutcome.REQUIRES_APPROVALS
    approvals = guardrail.required_approvals if needs_more else 0
    return GuardrailResult(guardrail.name, guardrail.effect, outcome, guardrail.message, approvals)
