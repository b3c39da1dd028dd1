"""Rules over groups of agents, as pure functions: which agents a group rule selects (by label,
owner, team or framework), which events it counts and how much each weighs (one call, a
refund's amount, tokens, cost), the window an event lands in (one per rule and group key, e.g.
one customer's record across every selected agent), and the replay of a rule over past events
for the what-if. No ORM: the shell (runtime.group_windows, actions.group_rules) feeds
these plain values."""

import hashlib
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from registry.manifest import duration_seconds

MEASURES = ("events", "amount", "tokens", "cost")
EFFECTS = ("escalate", "log", "block")  # block: decisions denied while over the limit
SELECTOR_KEYS = ("labels", "owner", "team", "framework")
MATCH_KEYS = ("kind", "action", "resource", "tool")
TEAM_LABEL = "team"
MAX_LIMIT = 1e15
WARN_SHARE = 0.8  # a group budget (tokens or cost) warns at 80% of its limit
BUDGET_MEASURES = ("tokens", "cost")


@dataclass(frozen=True)
class AgentFacts:
    """What a selector looks at: an agent's labels, owner, framework."""

    id: int
    name: str
    owner: str
    labels: dict[str, str] = field(default_factory=dict)
    framework: str = ""
    # each action's `max` in the agent's approved spec: the most one event of it may weigh
    # in a block rule's window (agent ids and owners are what a block's reach is judged by)
    action_max: dict[str, float] = field(default_factory=dict)
    owner_id: int | None = None


@dataclass(frozen=True)
class GroupRuleSpec:
    """A group rule as the counting needs it (the model's fields, without the ORM)."""

    id: int
    name: str
    selector: dict[str, Any]
    match: dict[str, Any]
    measure: str
    limit: float
    per: str
    per_record: bool = False
    effect: str = "escalate"
    revision: int = 1
    required_approvals: int = 1
    # block only: also deny the decisions of agents whose owners contributed nothing to the
    # window (compliance's explicit, audited choice; by default a block stays inside the
    # owners whose agents filled the window)
    across_owners: bool = False

    @property
    def seconds(self) -> int:
        return duration_seconds(self.per)


@dataclass(frozen=True)
class GroupCheck:
    """One event's weight in one group window: over `limit` within `seconds` is a breach."""

    rule_id: int
    key: str
    group_key: str
    seconds: int
    limit: float
    measure: str
    value: float
    member: str  # "<agent id>|<event id>|<value>": who, which event, how much
    warn_at: float | None = None  # budgets (tokens, cost): a warning from here to the limit

    @property
    def reported_above(self) -> float:
        """The total above which the window names its agents (the warning level if any)."""
        return self.limit if self.warn_at is None else self.warn_at


def validate(data: dict[str, Any]) -> list[dict[str, str]]:
    """Every problem with a rule's selector, match, measure, limit and window, each with its
    JSON pointer ([] when it is sound)."""
    errors = []

    def bad(pointer: str, message: str) -> None:
        errors.append({"pointer": pointer, "message": message})

    selector = data.get("selector") or {}
    if not isinstance(selector, dict):
        bad("/selector", "expected an object")
        selector = {}
    for key in sorted(set(selector) - set(SELECTOR_KEYS)):
        bad(f"/selector/{key}", f"unknown key; expected one of {', '.join(SELECTOR_KEYS)}")
    labels = selector.get("labels", {})
    if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        bad("/selector/labels", "expected an object of label names to string values")
    for key in ("owner", "team", "framework"):
        if key in selector and (not isinstance(selector[key], str) or not selector[key]):
            bad(f"/selector/{key}", "expected a non-empty string")
    match = data.get("match") or {}
    if not isinstance(match, dict):
        bad("/match", "expected an object")
        match = {}
    for key in sorted(set(match) - set(MATCH_KEYS)):
        bad(f"/match/{key}", f"unknown key; expected one of {', '.join(MATCH_KEYS)}")
    for key in MATCH_KEYS:
        if key in match and (not isinstance(match[key], str) or not match[key]):
            bad(f"/match/{key}", "expected a non-empty string")
    measure = data.get("measure")
    if measure not in MEASURES:
        bad("/measure", f"expected one of {', '.join(MEASURES)}")
    limit = data.get("limit")
    if isinstance(limit, bool) or not isinstance(limit, int | float) or not (
            0 <= limit <= MAX_LIMIT):
        bad("/limit", "expected a number between 0 and 1e15")
    try:
        seconds = duration_seconds(data.get("per") or "")
    except (ValueError, TypeError, KeyError):
        bad("/per", "expected a duration such as 30m, 1h or 1d")
    else:
        if not 60 <= seconds <= 86400:
            bad("/per", "expected a window between 1m and 1d")
    if data.get("effect", "escalate") not in EFFECTS:
        bad("/effect", f"expected one of {', '.join(EFFECTS)}")
    if data.get("effect") == "block" and data.get("per_record"):
        bad("/effect", "block covers the whole group: not with per-record windows")
    across = data.get("across_owners", False)
    if not isinstance(across, bool):
        bad("/across_owners", "expected true or false")
    elif across and data.get("effect") != "block":
        bad("/across_owners", "only a block rule reaches across owners")
    approvals = data.get("required_approvals", 1)
    if isinstance(approvals, bool) or not isinstance(approvals, int) or not 1 <= approvals <= 5:
        bad("/required_approvals", "expected 1 (count only) or 2 to 5 approvers")
    elif approvals > 1 and (measure not in ("events", "amount") or not match.get("action")
                            or data.get("per_record")):
        bad("/required_approvals", "sign-offs hold decisions on an action: match an action "
                                   "and count events or amount, not per record")
    if data.get("per_record") and match.get("kind") not in (None, "data_access"):
        bad("/per_record", "per-record windows count data_access events")
    return errors


def selects(rule: GroupRuleSpec, agent: AgentFacts) -> bool:
    """Whether the rule covers the agent: every condition of its selector holds ({}: all)."""
    selector = rule.selector
    labels = agent.labels or {}
    if any(labels.get(k) != v for k, v in (selector.get("labels") or {}).items()):
        return False
    if "team" in selector and labels.get(TEAM_LABEL) != selector["team"]:
        return False
    if "owner" in selector and agent.owner != selector["owner"]:
        return False
    return not ("framework" in selector and agent.framework != selector["framework"])


def weight(rule: GroupRuleSpec, event: Any) -> float | None:
    """How much an event counts in the rule's window (None: the rule does not count it)."""
    match = rule.match
    for key in MATCH_KEYS:
        if key in match and getattr(event, key, "") != match[key]:
            return None
    if rule.per_record and not event.record:
        return None
    if rule.measure == "events":
        return 1.0
    if rule.measure == "amount":
        return event.amount
    if rule.measure == "tokens":
        tokens = (getattr(event, "input_tokens", None), getattr(event, "output_tokens", None))
        return None if tokens == (None, None) else float(sum(t or 0 for t in tokens))
    return getattr(event, "cost", None)


def bounded_weight(rule: GroupRuleSpec, agent: AgentFacts, event: Any) -> float | None:
    """What an event weighs in the rule's window. In a block rule an amount counts at most
    the agent's own approved `max` for that action (or, with none, the rule's limit): events
    are self-reported, and one report of $1,000,000 must not stop other owners' agents."""
    value = weight(rule, event)
    if value is None or rule.effect != "block" or rule.measure != "amount":
        return value
    bound = agent.action_max.get(getattr(event, "action", "") or "")
    return min(value, rule.limit if bound is None else bound)


def group_key(rule: GroupRuleSpec, event: Any) -> str:
    """What one window of the rule is about: the whole group, or one record of it."""
    return f"record:{event.resource}:{event.record}" if rule.per_record else "all"


def window_key(rule: GroupRuleSpec, key: str) -> str:
    """The Redis key of a rule's window for one group key (a new revision starts afresh)."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return f"gw:{rule.id}:{rule.revision}:{digest}"


def checks(rules: list[GroupRuleSpec], agent: AgentFacts, event: Any) -> list[GroupCheck]:
    """The group windows an event counts in."""
    found = []
    for rule in rules:
        if not selects(rule, agent):
            continue
        value = bounded_weight(rule, agent, event)
        if value is None or value < 0:
            continue
        key = group_key(rule, event)
        found.append(GroupCheck(
            rule.id, window_key(rule, key), key, rule.seconds, rule.limit, rule.measure, value,
            f"{agent.id}|{event.id}|{value!r}",
            rule.limit * WARN_SHARE if rule.measure in BUDGET_MEASURES else None))
    return found


def _noun(measure: str) -> str:
    return {"events": "events", "amount": "in amounts", "tokens": "tokens",
            "cost": "in cost"}[measure]


def describe(rule: GroupRuleSpec, group: str, total: float) -> str:
    """A breach in words: "group rule payments-refunds: 25000 in amounts across the group
    per 1h, above 20000"."""
    where = "across the group" if group == "all" else f"on {group.split(':', 1)[1]}"
    return (f"group rule {rule.name}: {_number(total)} {_noun(rule.measure)} {where} per "
            f"{rule.per}, above {_number(rule.limit)}")


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


# --- what-if: the rule over past events --------------------------------------------------------


@dataclass
class Breach:
    """One window of a rule that went over its limit in a replay."""

    group_key: str
    first_event: str
    at: datetime
    total: float
    agents: list[str]
    events: int = 1  # events that arrived while the window was over the limit


class _Window:
    def __init__(self) -> None:
        self.members: deque[tuple[float, str, float]] = deque()
        self.total = 0.0

    def add(self, moment: float, agent: str, value: float, seconds: int) -> None:
        self.members.append((moment, agent, value))
        self.total += value
        while self.members and self.members[0][0] < moment - seconds:
            self.total -= self.members.popleft()[2]

    def agents(self) -> list[str]:
        return sorted({agent for _, agent, _ in self.members})


def replay(rule: GroupRuleSpec, events: list[tuple[AgentFacts, Any]]) -> list[Breach]:
    """What the rule would have flagged over past events (sorted by time), judged as live
    counting judges them: each window is the sum of weights in [ts - seconds, ts]; the first
    event over the limit opens a breach, which lasts `seconds` (later events over the limit
    in that time join it: one escalation, a finding per agent involved)."""
    seconds = rule.seconds
    windows: dict[str, _Window] = {}
    open_breach: dict[str, Breach] = {}
    breaches = []
    for agent, event in events:
        if not selects(rule, agent):
            continue
        value = bounded_weight(rule, agent, event)
        if value is None or value < 0:
            continue
        key = group_key(rule, event)
        window = windows.setdefault(key, _Window())
        window.add(event.ts.timestamp(), agent.name, value, seconds)
        if window.total <= rule.limit:
            continue
        current = open_breach.get(key)
        if current is not None and (event.ts - current.at).total_seconds() < seconds:
            current.events += 1
            current.total = max(current.total, window.total)
            current.agents = sorted(set(current.agents) | set(window.agents()))
            continue
        breach = Breach(key, event.id, event.ts, window.total, window.agents())
        open_breach[key] = breach
        breaches.append(breach)
    return breaches


def holds(rule: GroupRuleSpec, agent: AgentFacts, request: dict[str, Any],
          total: float) -> bool:
    """Whether a decision request (an action, maybe an amount) would take the rule's window,
    holding `total` now, over its limit, so it waits for the rule's sign-offs."""
    if rule.required_approvals < 2 or not selects(rule, agent):
        return False
    probe = _Probe(request.get("action") or "", request.get("amount"))
    value = weight(rule, probe)
    return value is not None and total + value > rule.limit


def blocks(rule: GroupRuleSpec, agent: AgentFacts, total: float,
           contributors: set[int] | None = None) -> bool:
    """Whether a block rule denies the agent's decisions: it covers the agent and its group
    window, holding `total` now, is over the limit (it lifts as the window falls back), and
    the agent's owner is among the owners whose agents filled the window (`contributors`,
    owner ids; None: not asked yet) unless the rule reaches across owners."""
    return (rule.effect == "block" and not rule.per_record and selects(rule, agent)
            and total > rule.limit and (rule.across_owners or contributors is None
                                        or agent.owner_id in contributors))


def block_reason(rule: GroupRuleSpec, total: float) -> str:
    """Why a decision is denied by a block rule, naming the rule."""
    return (f"{describe(rule, 'all', total)}: the group is blocked until the window falls "
            "back under the limit")


@dataclass(frozen=True)
class _Probe:
    """A decision request seen as the action event it would become."""

    action: str
    amount: float | None
    kind: str = "action"
    tool: str = ""
    resource: str = ""
    record: str = ""
