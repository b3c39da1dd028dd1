"""What a waiver covers, one rule for every reader (the live pass, the resync, live ingest
and the backtest): a JSON pointer and everything under it. And what it stands for: the spec
the agent may run with while it is in force, judged as that spec change would be. Pure: no
ORM."""

import copy
import re
from collections.abc import Iterable
from typing import Any

from config import pointers

# "/tools/crm.search", "/actions/payments.refund/approval_above", "/data/crm"
POINTER = re.compile(r"^(/[^/\s]{1,200}){1,4}$")
POINTER_EXPECTED = ("a JSON pointer into the spec of one to four parts, like /tools/crm.search "
                    "or /actions/payments.refund/approval_above")
AREAS = ("tools", "data", "actions", "limits", "grants", "model", "version", "running",
         "mcp_servers")
# Areas holding many items: a waiver names one of them, never the whole area.
COLLECTIONS = ("tools", "data", "actions", "limits", "grants", "mcp_servers")
# A waiver on these would let the agent run suspended, or stands for no spec change at all.
NEVER_WAIVED = ("running",)
SPECIFIC_EXPECTED = ("one item of an area, like /tools/crm.search or /data/crm: a whole area "
                     "(/tools, /data, ...) or /running is never waived")
ACTION_FIELDS = ("approval_above", "max")
LIMIT_METRICS = ("max_calls", "max_same_record")


def is_waived(waived: Iterable[str], pointer: str) -> bool:
    """Whether a drift or broken rule at `pointer` is waived by one of the waived pointers."""
    return any(pointer == w or pointer.startswith(f"{w}/") for w in waived)


def tokens(pointer: str) -> list[str]:
    """The unescaped reference tokens of a pointer (RFC 6901)."""
    return pointers.tokens(pointer)


def specific_problem(pointer: str) -> str | None:
    """Why a pointer may not be waived (a whole area, /running, an unknown area), or None."""
    if not POINTER.match(pointer):
        return f"expected {POINTER_EXPECTED}"
    parts = tokens(pointer)
    if parts[0] not in AREAS or parts[0] in NEVER_WAIVED or (
            parts[0] in COLLECTIONS and len(parts) < 2):
        return f"expected {SPECIFIC_EXPECTED}"
    return None


def waived_spec(spec: dict[str, Any], pointer: str) -> dict[str, Any] | None:
    """The spec the agent may run with, at worst, while a waiver on `pointer` is in force:
    the tool added, the data scope at admin, the action limit or behaviour limit gone. The
    waiver is judged as a proposal of this spec. None when the waived area cannot be put as
    a spec (grants, MCP servers): such a waiver is judged by the strictest bar."""
    parts = tokens(pointer)
    area, rest = parts[0], parts[1:]
    out = copy.deepcopy(spec)
    if area in ("model", "version") and not rest:
        return out  # what runs, not what it may do: the diff scores it neutral
    if area == "tools" and len(rest) == 1:
        out["tools"] = sorted({*out.get("tools", []), rest[0]})
        return out
    if area == "data" and len(rest) in (1, 2):
        data = [entry for entry in out.get("data", []) if entry.get("resource") != rest[0]]
        out["data"] = sorted([*data, {"resource": rest[0], "access": "admin"}],
                             key=lambda entry: entry["resource"])
        return out
    if area == "actions" and (len(rest) == 1 or (len(rest) == 2 and rest[1] in ACTION_FIELDS)):
        rule = dict(out.get("actions", {}).get(rest[0]) or
                    {field: None for field in ACTION_FIELDS})
        for field in rest[1:] or ACTION_FIELDS:
            rule[field] = None
        out["actions"] = {**out.get("actions", {}), rest[0]: rule}
        return out
    if area == "limits" and (len(rest) == 1 or (len(rest) == 2 and rest[1] in LIMIT_METRICS)):
        metrics = rest[1:] or LIMIT_METRICS
        out["limits"] = [limit for limit in out.get("limits", [])
                         if limit.get("resource") != rest[0]
                         or not any(metric in limit for metric in metrics)]
        return out
    return None
