"""Cross-call rules, as pure functions: what a single event violates on its own (tools and
resources outside the approved set, refunds above the threshold without sign-off, above the
maximum), which sliding windows it counts in, and what a proposal would have changed over past
events (the backtest)."""

import copy
import hashlib
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from reconciliation.events import Event

ACCESS_RANK = {"read": 1, "write": 2, "admin": 3}
DEDUPE_SECONDS = 3600  # a rule broken again within this long is the same finding


@dataclass(frozen=True)
class Violation:
    """One broken rule by one event."""

    kind: str
    pointer: str
    expected: Any
    actual: Any
    area: str  # the enforcement area: behaviour, or actions for action limits
    event_id: str
    rule: str  # plain language
    window_seconds: int = DEDUPE_SECONDS

    @property
    def rule_key(self) -> str:
        """Identity of the rule broken (not of the event), for per-window deduplication."""
        return hashlib.sha256(f"{self.kind}|{self.pointer}".encode()).hexdigest()[:24]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class WindowCheck:
    """A sliding window an event counts in: at most `limit` members per `seconds`."""

    key: str
    seconds: int
    limit: int
    kind: str
    pointer: str
    rule: str


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _amount(value: float) -> str:
    return f"${value:,.0f}" if float(value).is_integer() else f"${value:,.2f}"


def static_violations(spec: dict[str, Any], event: Event, *, signed_off: bool,
                      reused_decision: bool = False) -> list[Violation]:
    """What one event breaks on its own against the effective desired spec."""
    found = []
    if event.tool and event.tool not in spec.get("tools", []):
        found.append(Violation("tool_not_approved", f"/tools/{_escape(event.tool)}", None,
                               event.tool, "behaviour", event.id,
                               f"tool {event.tool} is not approved"))
    if event.resource:
        granted = {d["resource"] for d in spec.get("data", [])}
        if event.resource not in granted:
            found.append(Violation("resource_not_approved",
                                   f"/data/{_escape(event.resource)}", None, event.resource,
                                   "behaviour", event.id,
                                   f"resource {event.resource} is not approved"))
    limits = spec.get("actions", {}).get(event.action) if event.action else None
    if limits and event.amount is not None:
        ceiling, threshold = limits.get("max"), limits.get("approval_above")
        pointer = f"/actions/{_escape(event.action)}"
        if ceiling is not None and event.amount > ceiling:
            found.append(Violation("action_above_max", f"{pointer}/max", ceiling, event.amount,
                                   "actions", event.id,
                                   f"{event.action} of {_amount(event.amount)} is above the "
                                   f"maximum {_amount(ceiling)}"))
        elif threshold is not None and event.amount > threshold and not signed_off:
            found.append(Violation(
                "decision_reused" if reused_decision else "action_without_signoff",
                f"{pointer}/approval_above", threshold, event.amount, "actions", event.id,
                f"{event.action} of {_amount(event.amount)} above {_amount(threshold)} "
                + ("reused an already used sign-off" if reused_decision
                   else "without a human sign-off")))
    return found


def window_checks(spec: dict[str, Any], event: Event, agent_id: int,
                  durations: dict[str, int]) -> list[WindowCheck]:
    """The sliding windows an event counts in, from the spec's behaviour limits."""
    if not event.resource:
        return []
    checks = []
    for limit in spec.get("limits", []):
        if limit["resource"] != event.resource:
            continue
        seconds = durations[limit["per"]]
        pointer = f"/limits/{_escape(event.resource)}"
        if "max_calls" in limit:
            checks.append(WindowCheck(
                f"bw:{agent_id}:{event.resource}:calls:{seconds}", seconds, limit["max_calls"],
                "rate_limit_exceeded", f"{pointer}/max_calls",
                f"more than {limit['max_calls']} calls to {event.resource} per {limit['per']}"))
        elif "max_same_record" in limit and event.record:
            checks.append(WindowCheck(
                f"bw:{agent_id}:{event.resource}:record:{event.record}:{seconds}", seconds,
                limit["max_same_record"], "same_record_exceeded", f"{pointer}/max_same_record",
                f"more than {limit['max_same_record']} reads of one {event.resource} record "
                f"per {limit['per']}"))
    return checks


def window_violation(check: WindowCheck, seen: int, event_id: str) -> Violation | None:
    """The violation of a window that holds `seen` members once this event is in it."""
    if seen <= check.limit:
        return None
    return Violation(check.kind, check.pointer, check.limit, seen, "behaviour", event_id,
                     f"{check.rule}: {seen} in the window", window_seconds=check.seconds)


# --- raising a limit to what was seen -----------------------------------------------------------


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def raise_limit(spec: dict[str, Any], kind: str, pointer: str,
                actual: Any) -> tuple[dict[str, Any], str]:
    """A copy of `spec` that allows what a behaviour finding saw (`actual` at `pointer`), and
    one sentence saying what it changes. ValueError (with the reason) when there is nothing
    to raise: the rule is gone, it already allows it, or the kind has no limit."""
    spec = copy.deepcopy(spec)
    tokens = _tokens(pointer)
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
                             f"{_amount(rule[field])}")
        before, rule[field] = rule[field], amount
        return spec, (f"raise {field} for {action} from {_amount(before)} to "
                      f"{_amount(amount)}")
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


# --- backtest ----------------------------------------------------------------------------------


def outcome(spec: dict[str, Any], event: dict[str, Any]) -> str:
    """What a spec says of one past event: allowed, needs_signoff or denied (windows aside)."""
    if event.get("tool") and event["tool"] not in spec.get("tools", []):
        return "denied"
    if event.get("resource") and event["resource"] not in {
            d["resource"] for d in spec.get("data", [])}:
        return "denied"
    limits = spec.get("actions", {}).get(event.get("action") or "")
    amount = event.get("amount")
    if limits and amount is not None:
        if limits.get("max") is not None and amount > limits["max"]:
            return "denied"
        if limits.get("approval_above") is not None and amount > limits["approval_above"]:
            return "needs_signoff"
    return "allowed"


def _subject(event: dict[str, Any]) -> str:
    if event.get("action"):
        return f"{event['action']} actions"
    if event.get("tool"):
        return f"calls of {event['tool']}"
    return f"accesses to {event.get('resource')}"


WORDING = {
    ("needs_signoff", "allowed"): "would have allowed {n} {subject} that needed a human sign-off",
    ("denied", "allowed"): "would have allowed {n} {subject} that were outside the approved state",
    ("denied", "needs_signoff"): "would have let {n} {subject} through with a sign-off",
    ("allowed", "needs_signoff"): "would have held {n} {subject} for a human sign-off",
    ("allowed", "denied"): "would have blocked {n} {subject}",
    ("needs_signoff", "denied"): "would have blocked {n} {subject} that could be signed off",
}


def backtest(active: dict[str, Any] | None, proposed: dict[str, Any],
             events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """How a proposed spec would have treated past events differently from the active one."""
    active = active or {"tools": [], "data": [], "actions": {}}
    changed: Counter[tuple[str, str, str]] = Counter()
    for event in events:
        before, after = outcome(active, event), outcome(proposed, event)
        if before != after:
            changed[(_subject(event), before, after)] += 1
    return [{"subject": subject, "before": before, "after": after, "events": n,
             "text": WORDING[(before, after)].format(n=n, subject=subject)}
            for (subject, before, after), n in sorted(changed.items())]
