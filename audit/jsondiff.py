"""A flat, readable diff of two JSON values, keyed by JSON pointer.

List items are keyed by what they are, not where they stand: adding `crm.search` to
`[docs.search, orders.lookup]` is one added `/tools/crm.search`, not three renamed positions.
The tokens are the ones the drift engine puts in its pointers (`/tools/<name>`,
`/data/<resource>`, `/limits/<resource>/<metric>`), so a proposal's diff and a finding name the
same thing the same way. A list whose items have no unique identity stays positional.
"""

from dataclasses import dataclass
from typing import Any

from config import pointers


@dataclass(frozen=True)
class Change:
    """One leaf that was added, removed or changed."""

    pointer: str
    kind: str  # added | removed | changed
    before: Any = None
    after: Any = None


def escape(token: str) -> str:
    """RFC 6901 escaping of one pointer token."""
    return pointers.escape(token)


# Fields that name a list item (first present wins) and, for a rate limit, which metric it caps.
IDENTITY_FIELDS = ("name", "resource", "action", "id")
METRIC_FIELDS = ("max_calls", "max_same_record")


def _identity(item: Any) -> tuple[str, ...] | None:
    """The tokens that name a list item, or None when it has no name of its own."""
    if isinstance(item, str):
        return (str(item),)
    if not isinstance(item, dict):
        return None
    name = next((item[f] for f in IDENTITY_FIELDS if isinstance(item.get(f), str)), None)
    if name is None:
        return None
    metrics = [f for f in METRIC_FIELDS if f in item]
    return (name, metrics[0]) if len(metrics) == 1 else (name,)


def list_keys(items: list[Any]) -> list[str]:
    """Pointer tokens for the items of a list: their identities when every item has a unique
    one, else their positions."""
    identities = [_identity(item) for item in items]
    if None in identities or len(set(identities)) != len(identities):
        return [str(index) for index in range(len(items))]
    return ["/".join(escape(token) for token in identity) for identity in identities]


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key in value:
            _flatten(value[key], f"{prefix}/{escape(str(key))}", out)
    elif isinstance(value, list) and value:
        keys = list_keys(value)
        named = keys != [str(index) for index in range(len(value))]
        for key, item in zip(keys, value, strict=True):
            if named and isinstance(item, dict):
                _flatten_named(item, f"{prefix}/{key}", out)
            else:
                _flatten(item, f"{prefix}/{key}", out)
    else:
        out[prefix] = value


def _flatten_named(item: dict, prefix: str, out: dict[str, Any]) -> None:
    """An item whose name is in the pointer: its other fields below it (`/data/crm/access`), a
    rate limit's value at the pointer itself (`/limits/crm/max_calls`, its window below)."""
    identity = _identity(item) or ()
    name = next(f for f in IDENTITY_FIELDS if isinstance(item.get(f), str))
    rest = {k: v for k, v in item.items() if k != name and k not in identity[1:]}
    if len(identity) == 2:
        out[prefix] = item[identity[1]]
    elif not rest:
        out[prefix] = item[name]
    for key in rest:
        _flatten(rest[key], f"{prefix}/{escape(str(key))}", out)


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
