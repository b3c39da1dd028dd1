"""A flat, readable diff of two JSON values, keyed by JSON pointer."""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    """One leaf that was added, removed or changed."""

    pointer: str
    kind: str  # added | removed | changed
    before: Any = None
    after: Any = None


def escape(token: str) -> str:
    """RFC 6901 escaping of one pointer token."""
    return token.replace("~", "~0").replace("/", "~1")


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key in value:
            _flatten(value[key], f"{prefix}/{escape(str(key))}", out)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            _flatten(item, f"{prefix}/{index}", out)
    else:
        out[prefix] = value


def flat_changes(before: Any, after: Any) -> list[Change]:
    """Every leaf that differs, in pointer order."""
    old: dict[str, Any] = {}
    new: dict[str, Any] = {}
    if before is not None:
        _flatten(before, "", old)
    if after is not None:
        _flatten(after, "", new)
    changes = []
    for pointer in sorted(old.keys() | new.keys()):
        if pointer not in new:
            changes.append(Change(pointer or "/", "removed", before=old[pointer]))
        elif pointer not in old:
            changes.append(Change(pointer or "/", "added", after=new[pointer]))
        elif old[pointer] != new[pointer]:
            changes.append(Change(pointer or "/", "changed", old[pointer], new[pointer]))
    return changes
