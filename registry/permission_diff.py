"""What a proposed desired state changes in an agent's permissions, in plain language.

Approvers review a proposal against the active version (DESIGN.md §1, §4); each line here says what
changes and whether it widens what the agent may do, narrows it, or neither, so the approvals inbox
can put the riskiest proposals first. Pure Python, no Django: both specs are canonical dicts from
`registry.manifest.canonicalize`.

Decisions worth knowing:
- Risk is judged per line, never netted: a proposal that raises one limit and lowers another shows
  one widening and one narrowing line.
- Grants are compared as written; whether one has already expired is the reconciler's business.
  One grant per resource on both sides is compared field by field (access, expiry, reason);
  otherwise whole grants are added or removed.
- For a brand-new agent (no active version) access is listed as widening and everything that
  restricts (action limits, behaviour limits, enforcement) or describes (runtime) as neutral.
- Who owns the agent, its labels and its connector are part of what is approved: a new owner
  controls it, a label changed or removed can take it out of a guardrail's selector (selectors
  match labels by equality, so an added label can only bring guardrails in), and a connector
  pointed elsewhere decides what the reconciler sees and where corrections go. Each is listed
  and scored as widening (an added label as neutral).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from fractions import Fraction
from typing import Any

from agentgov.mcp_identity import same_server

from config.durations import duration_seconds
from config.money import money
from config.times import parse_timestamp
from registry.manifest import join_pointer

MINUS = "\u2212"
ACCESS_RANK = {"read": 1, "write": 2, "admin": 3}
# correct and block both stop drift at once; escalate waits for a human; log lets drift stand
ENFORCEMENT_STRENGTH = {"correct": 2, "block": 2, "escalate": 1, "log": 0}
ACTION_FIELDS = {"approval_above": "approval threshold", "max": "maximum"}
LIMIT_NOUNS = {"max_calls": "calls", "max_same_record": "reads of one record"}
BUDGET_NOUNS = {"tokens": "token", "cost": "cost"}
RUNTIME_FIELDS = ("framework", "model", "version")
REASON_CHARS = 60

_NO_LIMIT = float("inf")


class Area(StrEnum):
    """The part of the spec a change belongs to, in the order the diff lists them."""

    TOOLS = "tools"
    MCP = "mcp_servers"
    DATA = "data"
    GRANTS = "grants"
    ACTIONS = "actions"
    LIMITS = "limits"
    BUDGETS = "budgets"
    HEARTBEAT = "heartbeat"
    REVIEW = "review"  # when the approved state is next reviewed (recertification)
    ENFORCEMENT = "enforcement"
    OWNER = "owner"
    LABELS = "labels"
    CONNECTOR = "connector"
    DELEGATION = "delegation"  # agents it may call, MCP servers it shares (registry/toxic.py)
    RUNTIME = "runtime"


class Risk(StrEnum):
    """Whether a change lets the agent do more (widening), less (narrowing), or neither."""

    WIDENING = "widening"
    NARROWING = "narrowing"
    NEUTRAL = "neutral"


_AREA_ORDER = {area: i for i, area in enumerate(Area)}


@dataclass(frozen=True)
class PermissionChange:
    """One plain-language line of a permission diff, with where it points in the spec."""

    area: Area
    risk: Risk
    text: str
    pointer: str
    before: Any
    after: Any

    def to_dict(self) -> dict[str, Any]:
        """The change as a JSON-safe dict."""
        return {
            "area": str(self.area), "risk": str(self.risk), "text": self.text,
            "pointer": self.pointer, "before": self.before, "after": self.after,
        }


def permission_diff(
    active: dict[str, Any] | None, proposed: dict[str, Any], *,
    metadata_before: dict[str, Any] | None = None, metadata_after: dict[str, Any] | None = None,
) -> list[PermissionChange]:
    """Every permission change from `active` (None for a new agent) to `proposed`, sorted by
    area (tools, data, grants, actions, limits, enforcement, owner, labels, connector,
    runtime), then pointer. Owner and label changes are listed when both metadata are given
    (the agent as it is and as it would be)."""
    fresh = active is None
    old = active or {}
    changes = [
        *_tools(old.get("tools", []), proposed["tools"]),
        *_mcp_servers(old.get("mcp_servers", []), proposed.get("mcp_servers", [])),
        *_data(old.get("data", []), proposed["data"]),
        *_grants(old.get("grants", []), proposed["grants"]),
        *_actions(old.get("actions", {}), proposed["actions"], fresh),
        *_limits(old.get("limits", []), proposed["limits"], fresh),
        *_budgets(old.get("budgets") or [], proposed.get("budgets") or [], fresh),
        *_heartbeat(old.get("heartbeat"), proposed.get("heartbeat"), fresh),
        *_enforcement(old.get("enforcement", {}), proposed["enforcement"]),
        *_delegation(old, proposed),
        *_runtime(old, proposed, fresh),
    ]
    if metadata_before is not None and metadata_after is not None:
        changes += _metadata(metadata_before, metadata_after)
    # sorted() is stable: several grants on one resource keep the order they were found in
    return sorted(changes, key=lambda change: (_AREA_ORDER[change.area], change.pointer))


def risk_score(changes: Iterable[PermissionChange]) -> int:
    """A number to sort proposals by, riskiest first.

    20 for each action limit removed or raised (money can move without sign-off) and each
    token or cost budget removed or raised (money can be spent without a stop), 10 for each
    widening of access (a tool, an MCP server or tool, a changed MCP tool, a data scope or
    a grant added or widened), a new owner or a
    connector changed (who controls the agent, what the reconciler sees) and a review date
    later than the policy's (the approved state goes unreviewed longer), 5 for any other
    widening (a looser behaviour limit, weaker enforcement, a label changed or removed, a
    heartbeat relaxed or dropped), 0 for
    narrowing and neutral changes.
    """
    weights = {Area.ACTIONS: 20, Area.BUDGETS: 20, Area.REVIEW: 10, Area.TOOLS: 10,
               Area.MCP: 10, Area.DATA: 10, Area.GRANTS: 10, Area.OWNER: 10, Area.CONNECTOR: 10,
               Area.DELEGATION: 10}
    return sum(
        weights.get(change.area, 5) for change in changes if change.risk == Risk.WIDENING
    )


def summary(changes: Iterable[PermissionChange]) -> dict[str, int]:
    """How many changes of each risk, every risk present: {"widening": 2, "narrowing": 1, ...}."""
    counts = {str(risk): 0 for risk in Risk}
    for change in changes:
        counts[str(change.risk)] += 1
    return counts


# --- one function per area ---------------------------------------------------------------------


def _tools(old: list[str], new: list[str]) -> Iterator[PermissionChange]:
    """Tools added (widening) or removed (narrowing)."""
    for name in set(new) - set(old):
        yield PermissionChange(Area.TOOLS, Risk.WIDENING, f"+ tool {name}",
                               _pointer("tools", name), None, name)
    for name in set(old) - set(new):
        yield PermissionChange(Area.TOOLS, Risk.NARROWING, f"{MINUS} tool {name}",
                               _pointer("tools", name), name, None)


def _delegation(old: dict[str, Any], new: dict[str, Any]) -> Iterator[PermissionChange]:
    """Agents it may call, added (widening: it reaches further) or removed (narrowing); MCP
    servers are `_mcp_servers`."""
    for key, noun in (("delegates_to", "may call agent"),):
        before, after = set(old.get(key) or []), set(new.get(key) or [])
        for name in after - before:
            yield PermissionChange(Area.DELEGATION, Risk.WIDENING, f"+ {noun} {name}",
                                   _pointer(key, name), None, name)
        for name in before - after:
            yield PermissionChange(Area.DELEGATION, Risk.NARROWING, f"{MINUS} {noun} {name}",
                                   _pointer(key, name), name, None)


def _mcp_servers(old: list[dict], new: list[dict]) -> Iterator[PermissionChange]:
    """MCP servers and their tools: anything new the model can reach is widening, and so is a
    server pointed elsewhere or a tool whose description or input schema changed."""
    before = {server["name"]: server for server in old}
    after = {server["name"]: server for server in new}
    for name in after.keys() - before.keys():
        server = after[name]
        tools = ", ".join(tool["name"] for tool in server["tools"]) or "no tools"
        yield PermissionChange(Area.MCP, Risk.WIDENING,
                               f"+ MCP server {name} ({_mcp_target(server)}): {tools}",
                               _pointer("mcp_servers", name), None, server)
    for name in before.keys() - after.keys():
        yield PermissionChange(Area.MCP, Risk.NARROWING, f"{MINUS} MCP server {name}",
                               _pointer("mcp_servers", name), before[name], None)
    for name in before.keys() & after.keys():
        was, now = before[name], after[name]
        if not _same_server(was, now):
            yield PermissionChange(
                Area.MCP, Risk.WIDENING,
                f"MCP server {name}: {_mcp_target(was)} → {_mcp_target(now)}",
                _pointer("mcp_servers", name), _mcp_target(was), _mcp_target(now))
        yield from _mcp_tools(name, was["tools"], now["tools"])


def _mcp_tools(server: str, old: list[dict], new: list[dict]) -> Iterator[PermissionChange]:
    """Tools of one approved MCP server added, removed, or re-pinned to a new fingerprint."""
    before = {tool["name"]: tool for tool in old}
    after = {tool["name"]: tool for tool in new}
    for name in after.keys() - before.keys():
        yield PermissionChange(Area.MCP, Risk.WIDENING, f"+ MCP tool {server}/{name}",
                               _pointer("mcp_servers", server, "tools", name), None, after[name])
    for name in before.keys() - after.keys():
        yield PermissionChange(Area.MCP, Risk.NARROWING, f"{MINUS} MCP tool {server}/{name}",
                               _pointer("mcp_servers", server, "tools", name), before[name], None)
    for name in before.keys() & after.keys():
        if before[name]["fingerprint"] != after[name]["fingerprint"]:
            yield PermissionChange(
                Area.MCP, Risk.WIDENING,
                f"MCP tool {server}/{name}: description or input schema changed"
                f" ({before[name]['fingerprint'][:12]} → {after[name]['fingerprint'][:12]})",
                _pointer("mcp_servers", server, "tools", name), before[name], after[name])


def _data(old: list[dict], new: list[dict]) -> Iterator[PermissionChange]:
    """Data scopes added, removed, or moved up or down read < write < admin."""
    before = {scope["resource"]: scope["access"] for scope in old}
    after = {scope["resource"]: scope["access"] for scope in new}
    for resource in before.keys() | after.keys():
        was, now = before.get(resource), after.get(resource)
        if was == now:
            continue
        if was is None:
            risk, text = Risk.WIDENING, f"+ {resource} {now}"
        elif now is None:
            risk, text = Risk.NARROWING, f"{MINUS} {resource}"
        else:
            risk, text = _direction(ACCESS_RANK[was], ACCESS_RANK[now]), f"{resource} {was} → {now}"
        yield PermissionChange(Area.DATA, risk, text, _pointer("data", resource), was, now)


def _grants(old: list[dict], new: list[dict]) -> Iterator[PermissionChange]:
    """Time-bounded grants added, removed, widened, extended, or cut short."""
    resources = {grant["resource"] for grant in (*old, *new)}
    for resource in resources:
        was = [grant for grant in old if grant["resource"] == resource]
        now = [grant for grant in new if grant["resource"] == resource]
        if len(was) == 1 and len(now) == 1:
            yield from _grant_fields(was[0], now[0])
            continue
        removed, added = list(was), []
        for grant in now:
            if grant in removed:
                removed.remove(grant)
            else:
                added.append(grant)
        pointer = _pointer("grants", resource)
        for grant in added:
            text = (f"+ grant {resource} {grant['access']} {_until(grant)}"
                    f" ({_short(grant['reason'])})")
            yield PermissionChange(Area.GRANTS, Risk.WIDENING, text, pointer, None, grant)
        for grant in removed:
            text = f"{MINUS} grant on {resource}"
            if now or len(was) > 1:  # say which one when others on the resource remain or go too
                text += f" {grant['access']} {_until(grant)}"
            yield PermissionChange(Area.GRANTS, Risk.NARROWING, text, pointer, grant, None)


def _grant_fields(was: dict, now: dict) -> Iterator[PermissionChange]:
    """The field changes of the one grant on a resource."""
    resource = was["resource"]
    if was["access"] != now["access"]:
        risk = _direction(ACCESS_RANK[was["access"]], ACCESS_RANK[now["access"]])
        yield PermissionChange(
            Area.GRANTS, risk, f"grant on {resource} {was['access']} → {now['access']}",
            _pointer("grants", resource, "access"), was["access"], now["access"],
        )
    if "duration" in was or "duration" in now:
        yield from _grant_clock_change(was, now)
    elif was["expires_at"] != now["expires_at"]:
        risk = _direction(_instant(was["expires_at"]), _instant(now["expires_at"]))
        text = (f"grant on {resource} expires {_when(was['expires_at'])}"
                f" → {_when(now['expires_at'])}")
        yield PermissionChange(Area.GRANTS, risk, text, _pointer("grants", resource, "expires_at"),
                               was["expires_at"], now["expires_at"])
    if was["reason"] != now["reason"]:
        text = f"grant on {resource} reason: {_short(was['reason'])} → {_short(now['reason'])}"
        yield PermissionChange(Area.GRANTS, Risk.NEUTRAL, text,
                               _pointer("grants", resource, "reason"), was["reason"], now["reason"])


def _actions(old: dict, new: dict, fresh: bool) -> Iterator[PermissionChange]:
    """Money-style action limits; None means no such limit, so removing one is widening."""
    for name in old.keys() | new.keys():
        was, now = old.get(name), new.get(name)
        pointer = _pointer("actions", name)
        if was == now:
            continue
        if was is None and fresh:
            yield PermissionChange(Area.ACTIONS, Risk.NEUTRAL, f"{name}: {_rule(now, True)}",
                                   pointer, None, now)
        elif was is None:
            yield PermissionChange(Area.ACTIONS, Risk.NARROWING,
                                   f"{name} limits added: {_rule(now)}", pointer, None, now)
        elif now is None:
            yield PermissionChange(Area.ACTIONS, Risk.WIDENING,
                                   f"{name} limits removed: {_rule(was)}", pointer, was, None)
        else:
            for field, label in ACTION_FIELDS.items():
                if was[field] == now[field]:
                    continue
                if now[field] is None:
                    text = f"{name} {label} {money(was[field])} → removed"
                elif was[field] is None:
                    text = f"{name} {label} added: {money(now[field])}"
                else:
                    text = f"{name} {label} {money(was[field])} → {money(now[field])}"
                risk = _direction(_ceiling(was[field]), _ceiling(now[field]))
                yield PermissionChange(Area.ACTIONS, risk, text, _pointer("actions", name, field),
                                       was[field], now[field])


def _limits(old: list[dict], new: list[dict], fresh: bool) -> Iterator[PermissionChange]:
    """Behaviour limits keyed by (resource, kind); more allowed per second is widening."""
    before, after = _limits_by_key(old), _limits_by_key(new)
    for resource, kind in before.keys() | after.keys():
        was, now = before.get((resource, kind)), after.get((resource, kind))
        pointer = _pointer("limits", resource, kind)
        if was == now:
            continue
        if was is None:
            risk = Risk.NEUTRAL if fresh else Risk.NARROWING
            label = f"{resource}:" if fresh else f"{resource} limit added:"
            text = f"{label} {_allowance(now, kind)}"
        elif now is None:
            risk, text = Risk.WIDENING, f"{resource}: {_allowance(was, kind)} → removed"
        else:
            risk = _direction(_rate(was, kind), _rate(now, kind))
            text = f"{resource}: {_allowance(was, kind)} → {now[kind]} per {now['per']}"
        yield PermissionChange(Area.LIMITS, risk, text, pointer, was, now)


def _budgets(old: list[dict], new: list[dict], fresh: bool) -> Iterator[PermissionChange]:
    """Token and cost budgets, one per (kind, window): removed or raised is widening (the
    agent may spend more before it is stopped), added or lowered narrowing (neutral for a new
    agent, as every restriction is)."""
    def by_key(budgets: list[dict]) -> dict[tuple[str, str], float]:
        return {(kind, b["per"]): b[kind] for b in budgets for kind in BUDGET_NOUNS if kind in b}

    was_all, now_all = by_key(old), by_key(new)
    for key in sorted(was_all.keys() | now_all.keys()):
        kind, per = key
        was, now = was_all.get(key), now_all.get(key)
        if was == now:
            continue
        pointer = _pointer("budgets", f"{kind}:{per}")
        noun = BUDGET_NOUNS[kind]
        if was is None:
            risk = Risk.NEUTRAL if fresh else Risk.NARROWING
            yield PermissionChange(Area.BUDGETS, risk, f"+ budget {_budget(kind, now)} per {per}",
                                   pointer, None, now)
        elif now is None:
            yield PermissionChange(Area.BUDGETS, Risk.WIDENING,
                                   f"{MINUS} budget {_budget(kind, was)} per {per}: no {noun} "
                                   "budget in that window", pointer, was, None)
        else:
            yield PermissionChange(Area.BUDGETS, _direction(was, now),
                                   f"budget per {per}: {_budget(kind, was)} → "
                                   f"{_budget(kind, now)}", pointer, was, now)


def _budget(kind: str, amount: float) -> str:
    return money(amount) if kind == "cost" else f"{amount:,} tokens"


def _heartbeat(was: str | None, now: str | None, fresh: bool) -> Iterator[PermissionChange]:
    """The longest the agent may go unheard: dropped or lengthened is widening (it may go
    silent longer before anyone is told), added or shortened narrowing."""
    if was == now:
        return
    if was is None:
        yield PermissionChange(Area.HEARTBEAT, Risk.NEUTRAL if fresh else Risk.NARROWING,
                               f"heartbeat every {now}", "/heartbeat", None, now)
    elif now is None:
        yield PermissionChange(Area.HEARTBEAT, Risk.WIDENING,
                               f"{MINUS} heartbeat every {was}: it may go unheard indefinitely",
                               "/heartbeat", was, None)
    else:
        yield PermissionChange(Area.HEARTBEAT,
                               _direction(duration_seconds(was, at_most=None),
                                          duration_seconds(now, at_most=None)),
                               f"heartbeat every {was} → every {now}", "/heartbeat", was, now)


def review_change(before_seconds: int | None, after_seconds: int | None) -> list[
        PermissionChange]:
    """A proposal's own review date against the one the policy would give it (both as
    seconds after approval): later is widening (the approved state goes unreviewed longer),
    sooner narrowing. [] when the proposal keeps the policy's date."""
    if after_seconds is None or after_seconds == before_seconds:
        return []
    risk = Risk.WIDENING if before_seconds is None or after_seconds > before_seconds else (
        Risk.NARROWING)
    was = "the policy's interval" if before_seconds is None else _days(before_seconds)
    return [PermissionChange(Area.REVIEW, risk,
                             f"next review {_days(after_seconds)} after approval (policy: "
                             f"{was})", "/review_after", before_seconds, after_seconds)]


def _days(seconds: int) -> str:
    if seconds % 86_400 == 0:
        return f"{seconds // 86_400}d"
    return f"{seconds // 3_600}h" if seconds % 3_600 == 0 else f"{seconds}s"


def _enforcement(old: dict, new: dict) -> Iterator[PermissionChange]:
    """Enforcement modes; a weaker mode (correct ≈ block > escalate > log) is widening."""
    for key in old.keys() | new.keys():
        was, now = old.get(key), new.get(key)
        if was == now:
            continue
        label = "default enforcement" if key == "default" else f"enforcement of {key}"
        if was is None:
            risk, text = Risk.NEUTRAL, f"{label}: {now}"
        else:
            # negated: the weaker the mode, the more the agent may do
            risk = _direction(-ENFORCEMENT_STRENGTH[was], -ENFORCEMENT_STRENGTH[now])
            text = f"{label}: {was} → {now}"
        yield PermissionChange(Area.ENFORCEMENT, risk, text, _pointer("enforcement", key),
                               was, now)


def _runtime(old: dict, new: dict, fresh: bool) -> Iterator[PermissionChange]:
    """Framework, model, version and connector: what runs, not what it may do, so neutral."""
    for field in RUNTIME_FIELDS:
        was, now = old.get(field), new[field]
        if was == now or (fresh and not now):
            continue
        text = f"{field} {now}" if fresh else f"{field} {was or 'unset'} → {now or 'unset'}"
        yield PermissionChange(Area.RUNTIME, Risk.NEUTRAL, text, _pointer(field), was, now)
    was, now = old.get("connector"), new["connector"]
    if was != now:
        detailed = _connector(was) == _connector(now)  # only the secret's name changed
        text = f"connector {_connector(now)}" if fresh else (
            f"connector {_connector(was, detailed)} → {_connector(now, detailed)}"
        )
        yield PermissionChange(Area.CONNECTOR, Risk.NEUTRAL if fresh else Risk.WIDENING, text,
                               "/connector", was, now)


def _metadata(before: dict[str, Any], after: dict[str, Any]) -> Iterator[PermissionChange]:
    """A new owner, and labels added (neutral), changed or removed (widening)."""
    was_owner, now_owner = before.get("owner"), after.get("owner")
    if now_owner and was_owner != now_owner:
        yield PermissionChange(Area.OWNER, Risk.WIDENING,
                               f"owner {was_owner or 'unset'} → {now_owner}",
                               "/metadata/owner", was_owner, now_owner)
    old, new = before.get("labels") or {}, after.get("labels") or {}
    for key in old.keys() | new.keys():
        was, now = old.get(key), new.get(key)
        if was == now:
            continue
        pointer = join_pointer("/metadata/labels", key)
        if was is None:
            yield PermissionChange(Area.LABELS, Risk.NEUTRAL, f"+ label {key}={now}", pointer,
                                   None, now)
        elif now is None:
            yield PermissionChange(Area.LABELS, Risk.WIDENING, f"{MINUS} label {key}={was}",
                                   pointer, was, None)
        else:
            yield PermissionChange(Area.LABELS, Risk.WIDENING, f"label {key}: {was} → {now}",
                                   pointer, was, now)


# --- small pieces -------------------------------------------------------------------------------


def _pointer(*tokens: str) -> str:
    """A JSON pointer from unescaped reference tokens."""
    pointer = ""
    for token in tokens:
        pointer = join_pointer(pointer, token)
    return pointer


def _direction(before: Any, after: Any) -> Risk:
    """Widening when `after` allows more than `before` on a scale where more means more allowed."""
    if after > before:
        return Risk.WIDENING
    return Risk.NARROWING if after < before else Risk.NEUTRAL


def _ceiling(amount: int | float | None) -> float:
    """An action limit as a number; no limit is infinitely high."""
    return _NO_LIMIT if amount is None else amount


def _rule(rule: dict, say_missing: bool = False) -> str:
    """An action's limits in words; for a new agent the missing ones are named too."""
    above, most = rule["approval_above"], rule["max"]
    parts = []
    if above is not None:
        parts.append(f"approval above {money(above)}")
    elif say_missing:
        parts.append("no approval needed")
    if most is not None:
        parts.append(f"never above {money(most)}")
    elif say_missing:
        parts.append("no maximum")
    return ", ".join(parts)


def _limits_by_key(limits: list[dict]) -> dict[tuple[str, str], dict]:
    """Behaviour limits by (resource, kind)."""
    return {
        (limit["resource"], kind): limit
        for limit in limits for kind in LIMIT_NOUNS if kind in limit
    }


def _allowance(limit: dict, kind: str) -> str:
    """`at most 40 calls per 1h`."""
    return f"at most {limit[kind]} {LIMIT_NOUNS[kind]} per {limit['per']}"


def _rate(limit: dict, kind: str) -> Fraction:
    """How much a limit allows per second, exactly."""
    return Fraction(limit[kind], duration_seconds(limit["per"], at_most=None))


def _instant(stamp: str) -> datetime:
    """A canonical UTC timestamp as a datetime (text order is wrong for fractions of a second)."""
    return parse_timestamp(stamp)


def _until(grant: dict) -> str:
    """`until 2026-12-04`, or `for 2h from approval` for a grant counted from approval."""
    if "duration" in grant:
        return f"for {grant['duration']} from approval"
    return f"until {_when(grant['expires_at'])}"


def _grant_clock_change(was: dict, now: dict) -> Iterator[PermissionChange]:
    """A grant's end changed where one side counts from approval: a longer duration widens;
    a switch between a fixed end and one counted from approval may, so a human looks."""
    resource = was["resource"]
    before, after = was.get("duration", was.get("expires_at")), now.get(
        "duration", now.get("expires_at"))
    if before == after and ("duration" in was) == ("duration" in now):
        return
    if "duration" in was and "duration" in now:
        risk = _direction(duration_seconds(was["duration"]), duration_seconds(now["duration"]))
    else:
        risk = Risk.WIDENING
    text = f"grant on {resource} {_until(was)} → {_until(now)}"
    key = "duration" if "duration" in now else "expires_at"
    yield PermissionChange(Area.GRANTS, risk, text, _pointer("grants", resource, key),
                           before, after)


def _when(stamp: str) -> str:
    """`2026-12-04`, or `2026-12-04 13:30 UTC` when not midnight (seconds only if not zero)."""
    date, _, time = stamp.partition("T")
    clock = time.rstrip("Zz").partition(".")[0]
    if clock == "00:00:00":
        return date
    return f"{date} {clock[:5] if clock.endswith(':00') else clock} UTC"


def _short(reason: str) -> str:
    """A reason on one line, cut to REASON_CHARS characters."""
    text = " ".join(reason.split())
    return text if len(text) <= REASON_CHARS else f"{text[: REASON_CHARS - 1]}…"


def _same_server(was: dict, now: dict) -> bool:
    """One server however spelled (agentgov.mcp_identity): a respelling points nowhere new,
    and a spelling that cannot be read is compared as written (so it always shows)."""
    return was["transport"] == now["transport"] and (
        same_server(was, now) or _mcp_target(was) == _mcp_target(now))


def _mcp_target(server: dict) -> str:
    """`http https://...` or `stdio <command>`: where an MCP server is reached."""
    return f"{server['transport']} {server.get('url') or server.get('command')}"


def _connector(connector: dict | None, detailed: bool = False) -> str:
    """`sandbox`, `http (https://...)`, with the secret's name when that is what changed."""
    if connector is None:
        return "unset"
    if connector["type"] != "http":
        return connector["type"]
    secret = f", secret {connector['secret_env']}" if detailed else ""
    return f"http ({connector['url']}{secret})"
