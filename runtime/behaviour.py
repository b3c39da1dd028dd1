"""Cross-call rules, as pure functions: what a single event violates on its own (tools and
resources outside the approved set, refunds above the threshold without sign-off, above the
maximum), which sliding windows it counts in, and what a proposal would have changed over past
events (the backtest)."""

import hashlib
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from config import pointers
from config.money import money
from config.times import parse_timestamp
from reconciliation.reconciler.diff import effective_desired
from registry.manifest import duration_seconds
from registry.waivers import is_waived
from runtime.events import Event

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
        # Its fields, not dataclasses.asdict: that deep copy was a tenth of an ingest batch
        # once most agents broke a rule in it (the values are numbers and strings).
        return dict(vars(self))


@dataclass(frozen=True)
class WindowCheck:
    """A sliding window an event counts in: at most `limit` members per `seconds`."""

    key: str
    seconds: int
    limit: int
    kind: str
    pointer: str
    rule: str

    @classmethod
    def of(cls, key: str, seconds: int, limit: int, kind: str, pointer: str,
           rule: str) -> "WindowCheck":
        """WindowCheck(...) for ingest's hot path (as Event.of: the same frozen, equal and
        hashable check, without the frozen __init__'s object.__setattr__ per field)."""
        check = object.__new__(cls)
        check.__dict__.update(key=key, seconds=seconds, limit=limit, kind=kind,
                              pointer=pointer, rule=rule)
        return check


def _escape(token: str) -> str:
    return pointers.escape(token)


def callable_tools(spec: dict[str, Any]) -> set[str]:
    """The agent's own approved tools and those of its approved MCP servers (the governed
    proxy records a call by the MCP tool's name, and refuses one whose fingerprint moved)."""
    mcp = {tool["name"] for server in spec.get("mcp_servers", []) for tool in server["tools"]}
    return {*spec.get("tools", []), *mcp}


def granted_resources(spec: dict[str, Any]) -> set[str]:
    """The resources the spec grants any access to."""
    return {d["resource"] for d in spec.get("data", [])}


def may_break_a_static_rule(event: Event, tools: set[str], granted: set[str]) -> bool:
    """Whether static_violations could find anything in the event (given callable_tools and
    granted_resources of the spec): an event with an approved tool and resource and no
    action breaks none of its rules, so a batch's many such events need not be handed to it."""
    return bool((event.tool and event.tool not in tools)
                or (event.resource and event.resource not in granted) or event.action)


def static_violations(spec: dict[str, Any], event: Event, *, signed_off: bool,
                      reused_decision: bool = False, tools: set[str] | None = None,
                      granted: set[str] | None = None) -> list[Violation]:
    """What one event breaks on its own against the effective desired spec. `tools` and
    `granted` are callable_tools(spec) and granted_resources(spec) when the caller judges
    many events by one spec and made them once."""
    found = []
    if event.tool and event.tool not in (callable_tools(spec) if tools is None else tools):
        found.append(Violation("tool_not_approved", f"/tools/{_escape(event.tool)}", None,
                               event.tool, "behaviour", event.id,
                               f"tool {event.tool} is not approved"))
    if event.resource:
        if event.resource not in (granted_resources(spec) if granted is None else granted):
            found.append(Violation("resource_not_approved",
                                   f"/data/{_escape(event.resource)}", None, event.resource,
                                   "behaviour", event.id,
                                   f"resource {event.resource} is not approved"))
    limits = spec.get("actions", {}).get(event.action) if event.action else None
    judged = bool(limits) and (limits.get("max") is not None
                               or limits.get("approval_above") is not None)
    if judged and event.amount is None and not signed_off:
        # Deny by default: an action whose rule reads an amount, reported without one it can
        # read, cannot be shown to be within its rule (the same reader ingest and decisions use).
        found.append(Violation("action_amount_unreadable", f"/actions/{_escape(event.action)}",
                               None, None, "actions", event.id,
                               f"{event.action} reported without an amount its rule can read"))
    if limits and event.amount is not None:
        ceiling, threshold = limits.get("max"), limits.get("approval_above")
        pointer = f"/actions/{_escape(event.action)}"
        if ceiling is not None and event.amount > ceiling:
            found.append(Violation("action_above_max", f"{pointer}/max", ceiling, event.amount,
                                   "actions", event.id,
                                   f"{event.action} of {money(event.amount)} is above the "
                                   f"maximum {money(ceiling)}"))
        elif threshold is not None and event.amount > threshold and not signed_off:
            found.append(Violation(
                "decision_reused" if reused_decision else "action_without_signoff",
                f"{pointer}/approval_above", threshold, event.amount, "actions", event.id,
                f"{event.action} of {money(event.amount)} above {money(threshold)} "
                + ("reused an already used sign-off" if reused_decision
                   else "without a human sign-off")))
    return found


def window_checks(spec: dict[str, Any], event: Event, agent_id: int,
                  durations: dict[str, int],
                  made: dict[tuple, Any] | None = None) -> list[WindowCheck]:
    """The sliding windows an event counts in, from the spec's behaviour limits, in the
    limits' order. `durations` holds seconds per duration text (filled here as needed).
    `made` keeps, for a caller judging many events of an agent by one spec, each resource's
    windows as _windows_of made them (the limits are then read once per agent and resource,
    not once per event)."""
    if not event.resource:
        return []
    windows = made.get((agent_id, event.resource)) if made is not None else None
    if windows is None:
        windows = _windows_of(spec, event.resource, agent_id, durations)
        if made is not None:
            made[(agent_id, event.resource)] = windows
    checks = []
    for window in windows:
        if type(window) is WindowCheck:
            checks.append(window)
        elif event.record:
            prefix, suffix, *said = window
            checks.append(WindowCheck.of(prefix + event.record + suffix, *said))
    return checks


def _windows_of(spec: dict[str, Any], resource: str, agent_id: int,
                durations: dict[str, int]) -> list[WindowCheck | tuple]:
    """An agent's windows over one resource: a calls window as its WindowCheck (the same for
    every event), a record window as its key's two halves around the record and the rest of
    its WindowCheck."""
    windows: list[WindowCheck | tuple] = []
    for limit in spec.get("limits", []):
        if limit["resource"] != resource:
            continue
        seconds = durations.get(limit["per"])
        if seconds is None:
            seconds = durations[limit["per"]] = duration_seconds(limit["per"])
        if "max_calls" in limit:
            windows.append(WindowCheck(
                f"bw:{agent_id}:{resource}:calls:{seconds}", seconds, limit["max_calls"],
                "rate_limit_exceeded", f"/limits/{_escape(resource)}/max_calls",
                f"more than {limit['max_calls']} calls to {resource} per {limit['per']}"))
        elif "max_same_record" in limit:
            windows.append((
                f"bw:{agent_id}:{resource}:record:", f":{seconds}", seconds,
                limit["max_same_record"], "same_record_exceeded",
                f"/limits/{_escape(resource)}/max_same_record",
                f"more than {limit['max_same_record']} reads of one {resource} record per "
                f"{limit['per']}"))
    return windows


def window_violation(check: WindowCheck, seen: int, event_id: str) -> Violation | None:
    """The violation of a window that holds `seen` members once this event is in it."""
    if seen <= check.limit:
        return None
    return Violation(check.kind, check.pointer, check.limit, seen, "behaviour", event_id,
                     f"{check.rule}: {seen} in the window", window_seconds=check.seconds)


# --- raising a limit to what was seen -----------------------------------------------------------


def _tokens(pointer: str) -> list[str]:
    return pointers.tokens(pointer)


# --- backtest ----------------------------------------------------------------------------------


def covers(request: dict[str, Any], event: Event) -> bool:
    """Whether a decision's request covers an event: the same action, at least its amount."""
    return request.get("action") == event.action and (
        event.amount is None or event.amount <= (request.get("amount") or 0))


class SlidingWindows:
    """The in-memory twin of runtime.windows for replaying history in time order: each
    count is the window's members in [ts - seconds, ts] once the event is in, as ZCOUNT
    answers live."""

    def __init__(self) -> None:
        self._members: dict[str, deque[float]] = {}

    def count(self, check: WindowCheck, moment: datetime) -> int:
        members = self._members.setdefault(check.key, deque())
        now = moment.timestamp()
        members.append(now)
        while members[0] < now - check.seconds:
            members.popleft()
        return len(members)


EMPTY_SPEC: dict[str, Any] = {"tools": [], "data": [], "actions": {}, "limits": [],
                              "grants": []}


def _expiry(value: str) -> datetime:
    return parse_timestamp(value)


def replay(spec: dict[str, Any], events: list[Event],
           signed: dict[str, tuple[bool, bool]], waived: tuple[str, ...] = ()
           ) -> dict[tuple[str, str], list[Violation]]:
    """What each rule of `spec` would have flagged over past events (sorted by time), judged
    exactly as live ingest judges them: static_violations against the spec effective at the
    event's time (grants live then), and window_checks counted in sliding windows.
    `signed` maps event ids to (signed off by a human decision, reused a used one)."""
    durations = {limit["per"]: duration_seconds(limit["per"]) for limit in spec.get("limits", [])}
    expiries = [_expiry(grant["expires_at"]) for grant in spec.get("grants", [])]
    effective: dict[tuple[bool, ...], dict[str, Any]] = {}
    counter = SlidingWindows()
    broken: dict[tuple[str, str], list[Violation]] = {}
    for event in events:
        live = tuple(expiry > event.ts for expiry in expiries)
        if live not in effective:
            effective[live] = effective_desired(spec, event.ts)
        signed_off, reused = signed.get(event.id, (False, False))
        found = static_violations(effective[live], event, signed_off=signed_off,
                                  reused_decision=reused)
        for check in window_checks(spec, event, 0, durations):
            if violation := window_violation(check, counter.count(check, event.ts), event.id):
                found.append(violation)
        for violation in found:
            if not is_waived(waived, violation.pointer):  # allowed by a waiver, as live
                broken.setdefault((violation.kind, violation.pointer), []).append(violation)
    return broken


_NOUNS = {"tool_not_approved": ("call", "calls"), "resource_not_approved": ("access", "accesses"),
          "rate_limit_exceeded": ("call", "calls"), "same_record_exceeded": ("read", "reads")}


def describe(kind: str, pointer: str, expected: Any, spec: dict[str, Any], n: int) -> str:
    """`n` events a rule flags, in words: "2 payments.refund actions above $500 without a
    human sign-off"."""
    tokens = _tokens(pointer)
    target = tokens[1] if len(tokens) > 1 else ""
    singular, plural = _NOUNS.get(kind, ("action", "actions"))
    noun = singular if n == 1 else plural
    per = next((limit["per"] for limit in spec.get("limits", []) if limit["resource"] == target
                and tokens[-1] in limit), "window")
    return {
        "tool_not_approved": f"{n} {noun} of {target}, a tool outside the approved set",
        "resource_not_approved": f"{n} {noun} to {target}, outside the approved data",
        "action_above_max": f"{n} {target} {noun} above the maximum {_money(expected)}",
        "action_without_signoff": (f"{n} {target} {noun} above {_money(expected)} without a "
                                   "human sign-off"),
        "decision_reused": f"{n} {target} {noun} on an already used sign-off",
        "ran_while_suspended": f"{n} {noun} after the agent was suspended",
        "action_amount_unreadable": f"{n} {target} {noun} without an amount the rule can read",
        "rate_limit_exceeded": f"{n} {noun} to {target} over {expected} per {per}",
        "same_record_exceeded": (f"{n} {noun} of one {target} record over {expected} per "
                                 f"{per}"),
    }.get(kind, f"{n} events breaking {kind} at {pointer}")


def _money(value: Any) -> str:
    return money(value) if isinstance(value, int | float) else str(value)


def backtest(active: dict[str, Any] | None, proposed: dict[str, Any], events: list[Event],
             signed: dict[str, tuple[bool, bool]], waived: tuple[str, ...] = ()
             ) -> dict[str, list[dict[str, Any]]]:
    """Per rule, how many past events the active spec and the proposal each flag, and what
    the proposal changes in words ("would have allowed 14 payments.refund actions above $500
    without a human sign-off"). `events` sorted by time."""
    active = active or EMPTY_SPEC
    before, after = (replay(active, events, signed, waived),
                     replay(proposed, events, signed, waived))
    rules, changes = [], []
    for key in sorted(set(before) | set(after)):
        kind, pointer = key
        now_flags, then_flags = len(before.get(key, [])), len(after.get(key, []))
        shown_spec, flagged = (active, before[key]) if now_flags else (proposed, after[key])
        rules.append({"kind": kind, "pointer": pointer, "current": now_flags,
                      "proposed": then_flags,
                      "rule": describe(kind, pointer, flagged[0].expected, shown_spec, 0)
                      .removeprefix("0 ")})
        if now_flags > then_flags:
            text = "would have allowed " + describe(
                kind, pointer, before[key][0].expected, active, now_flags - then_flags)
        elif then_flags > now_flags:
            text = "would have flagged " + describe(
                kind, pointer, after[key][0].expected, proposed, then_flags - now_flags
            ).replace(" ", " more ", 1)
        else:
            continue
        changes.append({"kind": kind, "pointer": pointer, "current": now_flags,
                        "proposed": then_flags, "text": text})
    return {"rules": rules, "changes": changes}
