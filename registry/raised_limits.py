"""What "raise the limit" would propose for a behaviour finding: a copy of the approved spec
that allows what the agent was seen doing, and one sentence saying what changes. Pure: a
spec in, a spec out (the escalation's resolution proposes it as a new version)."""

import copy
from typing import Any

from config import pointers
from config.money import money


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def raise_limit(spec: dict[str, Any], kind: str, pointer: str,
                actual: Any) -> tuple[dict[str, Any], str]:
    """A copy of `spec` that allows what a behaviour finding saw (`actual` at `pointer`), and
    one sentence saying what it changes. ValueError (with the reason) when there is nothing
    to raise: the rule is gone, it already allows it, or the kind has no limit."""
    spec = copy.deepcopy(spec)
    tokens = pointers.tokens(pointer)
    if kind in ("rate_limit_exceeded", "same_record_exceeded") and len(tokens) == 3:
        resource, field = tokens[1], tokens[2]
        limit = next((entry for entry in spec.get("limits", [])
                      if entry["resource"] == resource and field in entry), None)
        if limit is None:
            raise ValueError(f"the approved state has no {field} limit for {resource} any more")
        seen = int(actual)
        if limit[field] >= seen:
            raise ValueError(f"the approved {field} for {resource} is already {limit[field]}")
        before, limit[field] = limit[field], seen
        return spec, f"raise {field} for {resource} from {before} to {seen} per {limit['per']}"
    if kind in ("action_without_signoff", "action_above_max") and len(tokens) == 3:
        action, field = tokens[1], tokens[2]
        rule = spec.get("actions", {}).get(action)
        if rule is None or rule.get(field) is None:
            raise ValueError(f"the approved state has no {field} for {action} any more")
        amount = _number(float(actual))
        if rule[field] >= amount:
            raise ValueError(f"the approved {field} for {action} is already "
                             f"{money(rule[field])}")
        before, rule[field] = rule[field], amount
        return spec, (f"raise {field} for {action} from {money(before)} to "
                      f"{money(amount)}")
    if kind == "tool_not_approved" and len(tokens) == 2:
        if tokens[1] in spec.get("tools", []):
            raise ValueError(f"the tool {tokens[1]} is already approved")
        spec["tools"] = sorted([*spec.get("tools", []), tokens[1]])
        return spec, f"approve the tool {tokens[1]}"
    if kind == "resource_not_approved" and len(tokens) == 2:
        if tokens[1] in {d["resource"] for d in spec.get("data", [])}:
            raise ValueError(f"{tokens[1]} is already approved")
        spec["data"] = [*spec.get("data", []), {"resource": tokens[1], "access": "read"}]
        return spec, f"approve read access to {tokens[1]}"
    raise ValueError("there is no limit to raise for this kind of finding (a reused sign-off "
                     "is not allowed by any spec); acknowledge it or suspend the agent")
