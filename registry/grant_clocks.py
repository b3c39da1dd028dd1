"""Grants whose clock starts at approval: a duration in the proposal, a fixed expiry once
approved, so a slow review does not eat the grant. Pure: no ORM."""

import datetime as dt
from typing import Any

from registry.manifest import canonicalize, duration_seconds, format_timestamp


def counts_from_approval(grant: dict[str, Any]) -> bool:
    """Whether the grant's clock has not started yet (it starts when it is approved)."""
    return "duration" in grant and "expires_at" not in grant


def start_clocks(spec: dict[str, Any], at: dt.datetime) -> tuple[dict[str, Any], list[dict]]:
    """The spec with every grant counted from approval given its expiry `at` + its duration,
    in the fixed-expiry form every reader of an approved spec knows; and the grants started."""
    if not any(counts_from_approval(g) for g in spec.get("grants", [])):
        return spec, []
    started = {**spec, "grants": list(spec["grants"])}
    begun = []
    for i, grant in enumerate(started["grants"]):
        if counts_from_approval(grant):
            end = at + dt.timedelta(seconds=duration_seconds(grant["duration"]))
            started["grants"][i] = {"resource": grant["resource"], "access": grant["access"],
                                    "expires_at": format_timestamp(end),
                                    "reason": grant["reason"]}
            begun.append({**started["grants"][i], "duration": grant["duration"]})
    return canonicalize(started), begun
