"""How long a diff found empty stays empty (pure: no Django).

The diff of an unchanged desired spec against an unchanged observed state changes only when a
grant expires (the spec's, which drops out of the desired state, or the platform's, which turns
lingering access into drift). The next such moment bounds how long the resync may trust an
in-sync verdict without looking again."""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from reconciliation.reconciler.diff import _entries, _observed_expiry


def next_change_at(desired: Mapping[str, Any], observed: Mapping[str, Any] | None,
                   now: datetime) -> datetime | None:
    """The earliest grant expiry after `now` in the spec or the observed state (None: the
    verdict holds until the spec or the observation changes)."""
    grants = [*_entries(desired, "grants"), *_entries(observed or {}, "grants")]
    moments = [_observed_expiry(g.get("expires_at")) for g in grants if isinstance(g, Mapping)]
    later = [m for m in moments if m is not None and m > now]
    return min(later) if later else None
