"""Semantic diff between an agent's desired state and its observed state (DESIGN sections 1, 4, 5).

Pure Python: no Django, no ORM. The reconciler feeds it the canonical spec and the freshest
observation; it returns drifts (each with a JSON pointer, expected, actual, severity and the
operation that closes the gap) and can apply those operations to an observation, which is what a
connector does to the agent platform. It is level-triggered: a converged state plans nothing.

Decisions worth knowing:
- Access held on a resource is the highest level found in the observation's `data` and `grants`
  lists; an observed grant counts as held even past its `expires_at` (we only believe what the
  platform says it still has). Unknown access levels rank above `admin`, so they read as widening.
- An action limit observed as absent, None or not a finite number is not enforced.
- An observed behaviour limit counts only when its `per` window equals the desired one (a missing
  `per` means the canonical default "1h"); otherwise the approved limit is reported missing.
- A missing `model`, `version` or `running` in the observation is unknown and never drift.
- Actions observed but not desired only add restrictions and are ignored, so `action_added` is a
  reserved kind that `diff` never emits.
- MCP servers are compared only when the observation has `mcp_servers` (an agent that does not
  report them is unknown there, as with `model`). A server is one drift when it is added or
  missing as a whole; inside an approved server each tool is compared by name and fingerprint
  (an observed tool without a fingerprint is compared by name only), and a changed fingerprint
  carries both descriptions so a reviewer can read what the server now tells the model.
  Prompts, resources (by URI) and resource templates (by URI template) are compared the same
  way, but only when the observation lists them (an adapter reporting tools says nothing of
  prompts).
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from agentgov.mcp_identity import same_server

from audit.chain import canonical_json as chain_canonical_json
from config import pointers
from config.times import parse_timestamp

ACCESS_LEVELS = ("read", "write", "admin")
ACTION_LIMIT_FIELDS = ("approval_above", "max")
LIMIT_METRICS = ("max_calls", "max_same_record")
DEFAULT_LIMIT_WINDOW = "1h"
AGENT_TARGET = "agent"

_ACCESS_RANK = {level: rank for rank, level in enumerate(ACCESS_LEVELS, start=1)}
_UNKNOWN_ACCESS_RANK = len(ACCESS_LEVELS) + 1


class DriftKind(StrEnum):
    TOOL_ADDED = "tool_added"
    TOOL_REMOVED = "tool_removed"
    DATA_WIDENED = "data_widened"
    DATA_NARROWED = "data_narrowed"
    DATA_ADDED = "data_added"
    DATA_REMOVED = "data_removed"
    ACTION_LIMIT_MISSING = "action_limit_missing"
    ACTION_LIMIT_RAISED = "action_limit_raised"
    ACTION_LIMIT_LOWERED = "action_limit_lowered"
    ACTION_ADDED = "action_added"
    LIMIT_MISSING = "limit_missing"
    LIMIT_RAISED = "limit_raised"
    LIMIT_LOWERED = "limit_lowered"
    LIMIT_ADDED = "limit_added"
    MODEL_MISMATCH = "model_mismatch"
    VERSION_MISMATCH = "version_mismatch"
    EXPIRED_GRANT_PRESENT = "expired_grant_present"
    RUNNING_WHILE_SUSPENDED = "running_while_suspended"
    STOPPED_WHILE_ACTIVE = "stopped_while_active"
    MCP_SERVER_ADDED = "mcp_server_added"
    MCP_SERVER_REMOVED = "mcp_server_removed"
    MCP_SERVER_MOVED = "mcp_server_moved"
    MCP_TOOL_ADDED = "mcp_tool_added"
    MCP_TOOL_REMOVED = "mcp_tool_removed"
    MCP_TOOL_CHANGED = "mcp_tool_changed"
    MCP_PROMPT_ADDED = "mcp_prompt_added"
    MCP_PROMPT_REMOVED = "mcp_prompt_removed"
    MCP_PROMPT_CHANGED = "mcp_prompt_changed"
    MCP_RESOURCE_ADDED = "mcp_resource_added"
    MCP_RESOURCE_REMOVED = "mcp_resource_removed"
    MCP_RESOURCE_CHANGED = "mcp_resource_changed"
    MCP_RESOURCE_TEMPLATE_ADDED = "mcp_resource_template_added"
    MCP_RESOURCE_TEMPLATE_REMOVED = "mcp_resource_template_removed"
    MCP_RESOURCE_TEMPLATE_CHANGED = "mcp_resource_template_changed"


class Severity(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Area(StrEnum):
    """The enforcement area (spec.enforcement key) that decides what to do about a drift."""

    CONFIG = "config"
    ACTIONS = "actions"


class OperationKind(StrEnum):
    REMOVE_TOOL = "remove_tool"
    ADD_TOOL = "add_tool"
    SET_DATA_ACCESS = "set_data_access"
    REMOVE_DATA = "remove_data"
    SET_ACTION_LIMIT = "set_action_limit"
    SET_LIMIT = "set_limit"
    REMOVE_LIMIT = "remove_limit"
    SET_MODEL = "set_model"
    SET_VERSION = "set_version"
    SUSPEND = "suspend"
    RESUME = "resume"
    REMOVE_MCP_SERVER = "remove_mcp_server"
    SET_MCP_SERVER = "set_mcp_server"
    REMOVE_MCP_TOOL = "remove_mcp_tool"
    SET_MCP_TOOL = "set_mcp_tool"
    # a prompt, resource or resource template: value {"primitive", "key"} / {"primitive", "item"}
    REMOVE_MCP_ITEM = "remove_mcp_item"
    SET_MCP_ITEM = "set_mcp_item"


_HIGH, _MEDIUM, _LOW = Severity.HIGH, Severity.MEDIUM, Severity.LOW
# Graded by what the drift risks (see drift_severity): narrowing (something the agent lacks, a
# stricter threshold) is low, it hurts the agent's work, not the organisation; loosening what
# was approved is medium; gaining write access or losing a sign-off rule outright is high.
SEVERITY_BY_KIND = {
    DriftKind.TOOL_ADDED: _MEDIUM,
    DriftKind.TOOL_REMOVED: _LOW,
    DriftKind.DATA_WIDENED: _MEDIUM,  # high when it gains write or admin
    DriftKind.DATA_NARROWED: _LOW,
    DriftKind.DATA_ADDED: _MEDIUM,  # high when it gains write or admin
    DriftKind.DATA_REMOVED: _LOW,
    DriftKind.ACTION_LIMIT_MISSING: _HIGH,
    DriftKind.ACTION_LIMIT_RAISED: _MEDIUM,
    DriftKind.ACTION_LIMIT_LOWERED: _LOW,
    DriftKind.ACTION_ADDED: _LOW,
    DriftKind.LIMIT_MISSING: _HIGH,
    DriftKind.LIMIT_RAISED: _MEDIUM,
    DriftKind.LIMIT_LOWERED: _LOW,
    DriftKind.LIMIT_ADDED: _LOW,
    DriftKind.MODEL_MISMATCH: _MEDIUM,
    DriftKind.VERSION_MISMATCH: _MEDIUM,
    DriftKind.EXPIRED_GRANT_PRESENT: _MEDIUM,  # high when it gains write or admin
    DriftKind.RUNNING_WHILE_SUSPENDED: _HIGH,
    DriftKind.STOPPED_WHILE_ACTIVE: _LOW,
    # a server pointed elsewhere or a tool whose description changed is a new tool in disguise
    DriftKind.MCP_SERVER_ADDED: _HIGH,
    DriftKind.MCP_SERVER_REMOVED: _LOW,
    DriftKind.MCP_SERVER_MOVED: _HIGH,
    DriftKind.MCP_TOOL_ADDED: _HIGH,
    DriftKind.MCP_TOOL_REMOVED: _LOW,
    DriftKind.MCP_TOOL_CHANGED: _HIGH,
    # a prompt's text and a resource's description reach the model as a tool's do
    DriftKind.MCP_PROMPT_ADDED: _HIGH,
    DriftKind.MCP_PROMPT_REMOVED: _LOW,
    DriftKind.MCP_PROMPT_CHANGED: _HIGH,
    DriftKind.MCP_RESOURCE_ADDED: _HIGH,
    DriftKind.MCP_RESOURCE_REMOVED: _LOW,
    DriftKind.MCP_RESOURCE_CHANGED: _HIGH,
    DriftKind.MCP_RESOURCE_TEMPLATE_ADDED: _HIGH,
    DriftKind.MCP_RESOURCE_TEMPLATE_REMOVED: _LOW,
    DriftKind.MCP_RESOURCE_TEMPLATE_CHANGED: _HIGH,
}
# An MCP server's primitives, the field naming each and the drift kinds (added, removed,
# changed) of each. Tools keep their own operations; the others share REMOVE/SET_MCP_ITEM.
MCP_PRIMITIVES = {
    "tools": ("name", DriftKind.MCP_TOOL_ADDED, DriftKind.MCP_TOOL_REMOVED,
              DriftKind.MCP_TOOL_CHANGED),
    "prompts": ("name", DriftKind.MCP_PROMPT_ADDED, DriftKind.MCP_PROMPT_REMOVED,
                DriftKind.MCP_PROMPT_CHANGED),
    "resources": ("uri", DriftKind.MCP_RESOURCE_ADDED, DriftKind.MCP_RESOURCE_REMOVED,
                  DriftKind.MCP_RESOURCE_CHANGED),
    "resource_templates": ("uri_template", DriftKind.MCP_RESOURCE_TEMPLATE_ADDED,
                           DriftKind.MCP_RESOURCE_TEMPLATE_REMOVED,
                           DriftKind.MCP_RESOURCE_TEMPLATE_CHANGED),
}
MCP_CHANGED_KINDS = frozenset(kinds[3] for kinds in MCP_PRIMITIVES.values())
_ACCESS_KINDS = frozenset({DriftKind.DATA_WIDENED, DriftKind.DATA_ADDED,
                           DriftKind.EXPIRED_GRANT_PRESENT})


def drift_severity(kind: DriftKind, actual: Any) -> Severity:
    """How bad one drift is, from what it risks: a tool removed is low, a limit loosened
    medium, write access gained high (read access gained medium)."""
    if kind in _ACCESS_KINDS and _rank(actual) >= _rank("write"):
        return _HIGH
    return SEVERITY_BY_KIND[kind]


ACTIONS_AREA_KINDS = frozenset(
    {
        DriftKind.ACTION_LIMIT_MISSING,
        DriftKind.ACTION_LIMIT_RAISED,
        DriftKind.ACTION_LIMIT_LOWERED,
        DriftKind.ACTION_ADDED,
    }
)


def canonical_json(value: Any) -> str:
    """Sorted, compact JSON; integral floats become ints so 500 and 500.0 fingerprint alike."""
    return chain_canonical_json(_normalise(value))


def _normalise(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(key): _normalise(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_normalise(item) for item in value]
    return value


def json_pointer(*parts: str) -> str:
    """RFC 6901 pointer: '~' becomes '~0' and '/' becomes '~1' inside each part."""
    return pointers.pointer(*parts)


@dataclass(frozen=True)
class Operation:
    """One corrective change a connector applies to the agent platform."""

    op: OperationKind
    target: str
    value: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", OperationKind(self.op))

    @property
    def key(self) -> str:
        """Canonical identity, used to deduplicate and as input to idempotency keys."""
        return canonical_json([self.op, self.target, self.value])

    def __hash__(self) -> int:
        return hash(self.key)

    def to_dict(self) -> dict[str, Any]:
        return {"op": str(self.op), "target": self.target, "value": copy.deepcopy(self.value)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Operation:
        return cls(OperationKind(data["op"]), data["target"], copy.deepcopy(data.get("value")))


@dataclass(frozen=True)
class Drift:
    """One semantic difference between desired and actual state, with its correction."""

    kind: DriftKind
    pointer: str
    expected: Any
    actual: Any
    severity: Severity
    area: Area
    operation: Operation
    fingerprint: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", DriftKind(self.kind))
        object.__setattr__(self, "severity", Severity(self.severity))
        object.__setattr__(self, "area", Area(self.area))
        payload = canonical_json([self.kind, self.pointer, self.expected, self.actual])
        object.__setattr__(self, "fingerprint", hashlib.sha256(payload.encode()).hexdigest())

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": str(self.kind),
            "pointer": self.pointer,
            "expected": copy.deepcopy(self.expected),
            "actual": copy.deepcopy(self.actual),
            "severity": str(self.severity),
            "area": str(self.area),
            "operation": self.operation.to_dict(),
            "fingerprint": self.fingerprint,
        }


def _drift(
    kind: DriftKind, pointer: str, expected: Any, actual: Any, operation: Operation
) -> Drift:
    area = Area.ACTIONS if kind in ACTIONS_AREA_KINDS else Area.CONFIG
    return Drift(kind, pointer, expected, actual, drift_severity(kind, actual), area, operation)


# --- reading states -------------------------------------------------------------------------


def _require_aware(now: datetime) -> None:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be a timezone-aware datetime")


def _parse_expiry(value: Any) -> datetime:
    """An RFC 3339 expiry; a naive time is taken as UTC."""
    return parse_timestamp(value, naive=UTC)


def _observed_expiry(value: Any) -> datetime | None:
    try:
        return _parse_expiry(value)
    except (TypeError, ValueError):
        return None


def _rank(access: Any) -> int:
    if isinstance(access, str):
        return _ACCESS_RANK.get(access, _UNKNOWN_ACCESS_RANK)
    return _UNKNOWN_ACCESS_RANK


def _entries(state: Mapping[str, Any], key: str) -> list[Any]:
    value = state.get(key)
    return list(value) if isinstance(value, list | tuple) else []


def _on(entry: Any, resource: str) -> bool:
    return isinstance(entry, Mapping) and entry.get("resource") == resource


def _resource_entries(entries: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    for entry in entries:
        if isinstance(entry, Mapping) and isinstance(entry.get("resource"), str):
            yield entry


def _highest_access(entries: Iterable[Any]) -> dict[str, Any]:
    access: dict[str, Any] = {}
    for entry in _resource_entries(entries):
        resource, level = entry["resource"], entry.get("access")
        if resource not in access or _rank(level) > _rank(access[resource]):
            access[resource] = level
    return access


def _number(value: Any) -> float | int | None:
    """A limit value that is really enforced: a finite number (bools are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None  # 10**400 too


def _limit_entries(entries: Iterable[Any]) -> Iterator[tuple[tuple[str, str], Any, Any]]:
    """Yield ((resource, metric), value, per) for each metric present in each limit entry."""
    for entry in _resource_entries(entries):
        for metric in LIMIT_METRICS:
            if metric in entry:
                per = entry.get("per", DEFAULT_LIMIT_WINDOW)
                yield (entry["resource"], metric), entry[metric], per


def _strictest(values: Iterable[Any]) -> Any:
    values = list(values)
    numbers = [number for number in map(_number, values) if number is not None]
    if numbers:
        return min(numbers)
    return values[0] if values else None


# --- desired state --------------------------------------------------------------------------


def effective_desired(
    spec: Mapping[str, Any], now: datetime, *, suspended: bool = False
) -> dict[str, Any]:
    """The desired state at `now`: a deep copy of the canonical spec (enforcement kept) with
    expired grants (expires_at <= now) dropped, each live grant's access merged into `data`
    (the higher level wins, one entry per resource, sorted), and `running` = not suspended."""
    _require_aware(now)
    effective = copy.deepcopy(dict(spec))
    live = [g for g in _entries(spec, "grants") if _parse_expiry(g["expires_at"]) > now]
    access = _highest_access([*_entries(spec, "data"), *live])
    effective["data"] = [{"resource": r, "access": access[r]} for r in sorted(access)]
    effective["grants"] = copy.deepcopy(live)
    effective["running"] = not suspended
    return effective


# --- diff -----------------------------------------------------------------------------------


def diff(
    desired: Mapping[str, Any],
    actual: Mapping[str, Any] | None,
    now: datetime,
    *,
    suspended: bool = False,
) -> list[Drift]:
    """Semantic drift of `actual` from the canonical spec `desired` at `now`,
    sorted by (pointer, kind)."""
    effective = effective_desired(desired, now, suspended=suspended)
    observed: Mapping[str, Any] = actual or {}
    drifts = [
        *_diff_tools(effective, observed),
        *_diff_data(effective, observed, _expired_access(desired, observed, now)),
        *_diff_actions(effective, observed),
        *_diff_limits(effective, observed),
        *_diff_identity(effective, observed),
        *_diff_running(effective, observed),
        *_diff_mcp_servers(effective, observed),
    ]
    return sorted(drifts, key=lambda drift: (drift.pointer, drift.kind))


def _diff_tools(effective: Mapping[str, Any], observed: Mapping[str, Any]) -> Iterator[Drift]:
    wanted = {tool for tool in _entries(effective, "tools") if isinstance(tool, str)}
    present = {tool for tool in _entries(observed, "tools") if isinstance(tool, str)}
    for tool in sorted(present - wanted):
        operation = Operation(OperationKind.REMOVE_TOOL, tool)
        yield _drift(DriftKind.TOOL_ADDED, json_pointer("tools", tool), None, tool, operation)
    for tool in sorted(wanted - present):
        operation = Operation(OperationKind.ADD_TOOL, tool)
        yield _drift(DriftKind.TOOL_REMOVED, json_pointer("tools", tool), tool, None, operation)


def _expired_access(
    desired: Mapping[str, Any], observed: Mapping[str, Any], now: datetime
) -> dict[str, int]:
    """Highest access rank per resource granted by a grant that has expired at `now`."""
    expired = [g for g in _entries(desired, "grants") if _parse_expiry(g["expires_at"]) <= now]
    for grant in _resource_entries(_entries(observed, "grants")):
        expiry = _observed_expiry(grant.get("expires_at"))
        if expiry is not None and expiry <= now:
            expired.append(grant)
    return {resource: _rank(level) for resource, level in _highest_access(expired).items()}


def _diff_data(
    effective: Mapping[str, Any], observed: Mapping[str, Any], expired: Mapping[str, int]
) -> Iterator[Drift]:
    wanted = _highest_access(_entries(effective, "data"))
    held = _highest_access([*_entries(observed, "data"), *_entries(observed, "grants")])
    for resource in sorted(wanted.keys() | held.keys()):
        expected, got = wanted.get(resource), held.get(resource)
        if resource not in held:
            kind = DriftKind.DATA_REMOVED
        elif resource not in wanted or _rank(got) > _rank(expected):
            if _rank(got) <= expired.get(resource, 0):
                kind = DriftKind.EXPIRED_GRANT_PRESENT  # an expired grant's access lingers
            elif resource not in wanted:
                kind = DriftKind.DATA_ADDED
            else:
                kind = DriftKind.DATA_WIDENED
        elif _rank(got) < _rank(expected):
            kind = DriftKind.DATA_NARROWED
        else:
            continue
        if resource in wanted:
            operation = Operation(OperationKind.SET_DATA_ACCESS, resource, expected)
        else:
            operation = Operation(OperationKind.REMOVE_DATA, resource)
        yield _drift(kind, json_pointer("data", resource), expected, got, operation)


def _diff_actions(effective: Mapping[str, Any], observed: Mapping[str, Any]) -> Iterator[Drift]:
    wanted = effective.get("actions") or {}
    present = observed.get("actions")
    present = present if isinstance(present, Mapping) else {}
    for name in sorted(wanted):
        limits = wanted[name] or {}
        entry = present.get(name)
        entry = entry if isinstance(entry, Mapping) else {}
        for limit in ACTION_LIMIT_FIELDS:
            expected, got = _number(limits.get(limit)), _number(entry.get(limit))
            if expected == got:
                continue
            if got is None:
                kind = DriftKind.ACTION_LIMIT_MISSING
            elif expected is None or got < expected:
                kind = DriftKind.ACTION_LIMIT_LOWERED  # stricter than approved
            else:
                kind = DriftKind.ACTION_LIMIT_RAISED
            operation = Operation(OperationKind.SET_ACTION_LIMIT, name, {limit: limits.get(limit)})
            pointer = json_pointer("actions", name, limit)
            yield _drift(kind, pointer, limits.get(limit), entry.get(limit), operation)


def _diff_limits(effective: Mapping[str, Any], observed: Mapping[str, Any]) -> Iterator[Drift]:
    wanted: dict[tuple[str, str], tuple[Any, Any]] = {}
    for key, value, per in _limit_entries(_entries(effective, "limits")):
        wanted.setdefault(key, (value, per))
    present: dict[tuple[str, str], list[tuple[Any, Any]]] = {}
    for key, value, per in _limit_entries(_entries(observed, "limits")):
        present.setdefault(key, []).append((value, per))

    for key in sorted(wanted.keys() | present.keys()):
        resource, metric = key
        pointer = json_pointer("limits", resource, metric)
        if key not in wanted:
            got = _strictest(value for value, _ in present[key])
            operation = Operation(OperationKind.REMOVE_LIMIT, resource, metric)
            yield _drift(DriftKind.LIMIT_ADDED, pointer, None, got, operation)
            continue
        expected, per = wanted[key]
        got = _strictest(value for value, window in present.get(key, []) if window == per)
        if _number(got) is None:
            kind = DriftKind.LIMIT_MISSING
            got = None
        elif got > expected:
            kind = DriftKind.LIMIT_RAISED
        elif got < expected:
            kind = DriftKind.LIMIT_LOWERED
        else:
            continue
        operation = Operation(OperationKind.SET_LIMIT, resource, {metric: expected, "per": per})
        yield _drift(kind, pointer, expected, got, operation)


def _diff_identity(effective: Mapping[str, Any], observed: Mapping[str, Any]) -> Iterator[Drift]:
    checks = (
        ("model", DriftKind.MODEL_MISMATCH, OperationKind.SET_MODEL),
        ("version", DriftKind.VERSION_MISMATCH, OperationKind.SET_VERSION),
    )
    for key, kind, op in checks:
        expected, got = effective.get(key), observed.get(key)
        if got is not None and expected is not None and got != expected:
            yield _drift(kind, json_pointer(key), expected, got, Operation(op, key, expected))


def _diff_running(effective: Mapping[str, Any], observed: Mapping[str, Any]) -> Iterator[Drift]:
    expected, got = effective["running"], observed.get("running")
    if not isinstance(got, bool) or got == expected:
        return
    if got:
        kind, op = DriftKind.RUNNING_WHILE_SUSPENDED, OperationKind.SUSPEND
    else:
        kind, op = DriftKind.STOPPED_WHILE_ACTIVE, OperationKind.RESUME
    operation = Operation(op, AGENT_TARGET)
    yield _drift(kind, json_pointer("running"), expected, got, operation)


def _by_name(entries: Iterable[Any]) -> dict[str, Mapping[str, Any]]:
    """Entries with a string name, by name (the first of a repeated name wins)."""
    named: dict[str, Mapping[str, Any]] = {}
    for entry in entries:
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            named.setdefault(entry["name"], entry)
    return named


def _tool_face(tool: Mapping[str, Any]) -> dict[str, Any]:
    """What a tool tells the model, as far as known: its fingerprint and description."""
    return {key: tool[key] for key in ("fingerprint", "description") if key in tool}


def _diff_mcp_servers(
    effective: Mapping[str, Any], observed: Mapping[str, Any]
) -> Iterator[Drift]:
    if not isinstance(observed.get("mcp_servers"), list | tuple):
        return
    wanted = _by_name(_entries(effective, "mcp_servers"))
    present = _by_name(_entries(observed, "mcp_servers"))
    for name in sorted(wanted.keys() | present.keys()):
        pointer = json_pointer("mcp_servers", name)
        approved, seen = wanted.get(name), present.get(name)
        if approved is None:
            operation = Operation(OperationKind.REMOVE_MCP_SERVER, name)
            yield _drift(DriftKind.MCP_SERVER_ADDED, pointer, None, copy.deepcopy(dict(seen)),
                         operation)
            continue
        restore = Operation(OperationKind.SET_MCP_SERVER, name, copy.deepcopy(dict(approved)))
        if seen is None:
            yield _drift(DriftKind.MCP_SERVER_REMOVED, pointer, copy.deepcopy(dict(approved)),
                         None, restore)
            continue
        for key in ("url", "command"):
            if key in approved and seen.get(key) is not None and not same_server(
                    {key: approved[key]}, {key: seen[key]}):
                # one identity (agentgov.mcp_identity): a respelling of the approved server is
                # not a move; one that cannot be read matches nothing, so it is one
                yield _drift(DriftKind.MCP_SERVER_MOVED, json_pointer("mcp_servers", name, key),
                             approved[key], seen[key], restore)
        yield from _diff_mcp_tools(name, approved, seen)


def _diff_mcp_tools(
    server: str, approved: Mapping[str, Any], seen: Mapping[str, Any]
) -> Iterator[Drift]:
    """Each primitive the observation lists (a reporter that does not list prompts says
    nothing about them), compared by name (URI) and fingerprint."""
    for primitive, (key, added, removed, changed) in MCP_PRIMITIVES.items():
        if primitive != "tools" and not isinstance(seen.get(primitive), list | tuple):
            continue
        wanted = _by_key(_entries(approved, primitive), key)
        present = _by_key(_entries(seen, primitive), key)
        for name in sorted(wanted.keys() | present.keys()):
            pointer = json_pointer("mcp_servers", server, primitive, name)
            item, offered = wanted.get(name), present.get(name)
            if item is None:
                yield _drift(added, pointer, None, _tool_face(offered),
                             _mcp_operation(server, primitive, name, None))
                continue
            operation = _mcp_operation(server, primitive, name, item)
            if offered is None:
                yield _drift(removed, pointer, _tool_face(item), None, operation)
            elif "fingerprint" in offered and offered["fingerprint"] != item.get("fingerprint"):
                yield _drift(changed, pointer, _tool_face(item), _tool_face(offered), operation)


def _by_key(entries: Iterable[Any], key: str) -> dict[str, Mapping[str, Any]]:
    """Entries with a string `key`, by it (the first of a repeated one wins)."""
    keyed: dict[str, Mapping[str, Any]] = {}
    for entry in entries:
        if isinstance(entry, Mapping) and isinstance(entry.get(key), str):
            keyed.setdefault(entry[key], entry)
    return keyed


def _mcp_operation(server: str, primitive: str, name: str,
                   approved: Mapping[str, Any] | None) -> Operation:
    """Back to the approved item (or without the unapproved one)."""
    if primitive == "tools":
        if approved is None:
            return Operation(OperationKind.REMOVE_MCP_TOOL, server, name)
        return Operation(OperationKind.SET_MCP_TOOL, server, copy.deepcopy(dict(approved)))
    if approved is None:
        return Operation(OperationKind.REMOVE_MCP_ITEM, server,
                         {"primitive": primitive, "key": name})
    return Operation(OperationKind.SET_MCP_ITEM, server,
                     {"primitive": primitive, "item": copy.deepcopy(dict(approved))})


# --- apply (the plan is reconciliation/reconciler/plan.py) -----------------------------------

def apply_operations(
    actual: Mapping[str, Any] | None, operations: Iterable[Operation | Mapping[str, Any]]
) -> dict[str, Any]:
    """A new observed state with `operations` (Operation objects or their dicts) applied."""
    state = copy.deepcopy(dict(actual or {}))
    for raw in operations:
        operation = raw if isinstance(raw, Operation) else Operation.from_dict(raw)
        _APPLY[operation.op](state, operation.target, copy.deepcopy(operation.value))
    return state


def _remove_tool(state: dict[str, Any], tool: str, _: Any) -> None:
    state["tools"] = [t for t in _entries(state, "tools") if t != tool]


def _add_tool(state: dict[str, Any], tool: str, _: Any) -> None:
    tools = _entries(state, "tools")
    state["tools"] = tools if tool in tools else [*tools, tool]


def _set_data_access(state: dict[str, Any], resource: str, access: Any) -> None:
    """Exactly `access` on `resource`: one data entry, and no grant that reaches higher."""
    data = [entry for entry in _entries(state, "data") if not _on(entry, resource)]
    state["data"] = [*data, {"resource": resource, "access": access}]
    if "grants" in state:
        state["grants"] = [
            grant
            for grant in _entries(state, "grants")
            if not (_on(grant, resource) and _rank(grant.get("access")) > _rank(access))
        ]


def _remove_data(state: dict[str, Any], resource: str, _: Any) -> None:
    state["data"] = [entry for entry in _entries(state, "data") if not _on(entry, resource)]
    if "grants" in state:
        state["grants"] = [g for g in _entries(state, "grants") if not _on(g, resource)]


def _set_action_limit(state: dict[str, Any], action: str, limits: Mapping[str, Any]) -> None:
    actions = state.get("actions")
    actions = dict(actions) if isinstance(actions, Mapping) else {}
    entry = actions.get(action)
    entry = dict(entry) if isinstance(entry, Mapping) else {}
    for limit, value in limits.items():
        if value is None:
            entry.pop(limit, None)
        else:
            entry[limit] = value
    actions[action] = entry
    state["actions"] = actions


def _without_limit(entries: list[Any], resource: str, metric: str) -> list[Any]:
    kept = []
    for entry in entries:
        if _on(entry, resource) and metric in entry:
            entry = {key: value for key, value in entry.items() if key != metric}
            if not any(other in entry for other in LIMIT_METRICS):
                continue
        kept.append(entry)
    return kept


def _set_limit(state: dict[str, Any], resource: str, limit: Mapping[str, Any]) -> None:
    (metric,) = [key for key in LIMIT_METRICS if key in limit]
    limits = _without_limit(_entries(state, "limits"), resource, metric)
    state["limits"] = [*limits, {"resource": resource, **limit}]


def _remove_limit(state: dict[str, Any], resource: str, metric: str) -> None:
    state["limits"] = _without_limit(_entries(state, "limits"), resource, metric)


def _set_model(state: dict[str, Any], _target: str, model: Any) -> None:
    state["model"] = model


def _set_version(state: dict[str, Any], _target: str, version: Any) -> None:
    state["version"] = version


def _suspend(state: dict[str, Any], _target: str, _: Any) -> None:
    state["running"] = False


def _resume(state: dict[str, Any], _target: str, _: Any) -> None:
    state["running"] = True


def _servers_without(state: dict[str, Any], server: str) -> list[Any]:
    return [entry for entry in _entries(state, "mcp_servers")
            if not (isinstance(entry, Mapping) and entry.get("name") == server)]


def _remove_mcp_server(state: dict[str, Any], server: str, _: Any) -> None:
    state["mcp_servers"] = _servers_without(state, server)


def _set_mcp_server(state: dict[str, Any], server: str, approved: Mapping[str, Any]) -> None:
    state["mcp_servers"] = [*_servers_without(state, server), dict(approved)]


def _change_mcp_tools(state: dict[str, Any], server: str, tool: str,
                      replacement: Mapping[str, Any] | None, primitive: str = "tools") -> None:
    """The server's tools (or other primitive) without `tool`, plus `replacement` if given."""
    key = MCP_PRIMITIVES[primitive][0]
    servers = []
    for entry in _entries(state, "mcp_servers"):
        if isinstance(entry, Mapping) and entry.get("name") == server:
            items = [t for t in _entries(entry, primitive)
                     if not (isinstance(t, Mapping) and t.get(key) == tool)]
            entry = {**entry, primitive: [*items, *([dict(replacement)] if replacement else [])]}
        servers.append(entry)
    state["mcp_servers"] = servers


def _remove_mcp_tool(state: dict[str, Any], server: str, tool: str) -> None:
    _change_mcp_tools(state, server, tool, None)


def _set_mcp_tool(state: dict[str, Any], server: str, tool: Mapping[str, Any]) -> None:
    _change_mcp_tools(state, server, tool["name"], tool)


def _remove_mcp_item(state: dict[str, Any], server: str, value: Mapping[str, Any]) -> None:
    _change_mcp_tools(state, server, value["key"], None, value["primitive"])


def _set_mcp_item(state: dict[str, Any], server: str, value: Mapping[str, Any]) -> None:
    primitive, item = value["primitive"], value["item"]
    _change_mcp_tools(state, server, item[MCP_PRIMITIVES[primitive][0]], item, primitive)


_APPLY = {
    OperationKind.REMOVE_TOOL: _remove_tool,
    OperationKind.ADD_TOOL: _add_tool,
    OperationKind.SET_DATA_ACCESS: _set_data_access,
    OperationKind.REMOVE_DATA: _remove_data,
    OperationKind.SET_ACTION_LIMIT: _set_action_limit,
    OperationKind.SET_LIMIT: _set_limit,
    OperationKind.REMOVE_LIMIT: _remove_limit,
    OperationKind.SET_MODEL: _set_model,
    OperationKind.SET_VERSION: _set_version,
    OperationKind.SUSPEND: _suspend,
    OperationKind.RESUME: _resume,
    OperationKind.REMOVE_MCP_SERVER: _remove_mcp_server,
    OperationKind.SET_MCP_SERVER: _set_mcp_server,
    OperationKind.REMOVE_MCP_TOOL: _remove_mcp_tool,
    OperationKind.SET_MCP_TOOL: _set_mcp_tool,
    OperationKind.REMOVE_MCP_ITEM: _remove_mcp_item,
    OperationKind.SET_MCP_ITEM: _set_mcp_item,
}
