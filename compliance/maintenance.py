"""Whether a maintenance window holds an agent's corrections now: read by the reconcile pass
(drift is recorded; a correction whose kind the window does not allow waits for its end).
Imports nothing from reconciliation."""

from datetime import datetime
from typing import Any

from compliance.models import MaintenanceWindow


def windows_open(now: datetime) -> list[MaintenanceWindow]:
    """The windows in force at `now` (usually none: one cheap query)."""
    return list(MaintenanceWindow.objects.select_related("created_by").filter(
        cancelled_at__isnull=True, starts_at__lte=now, ends_at__gt=now).order_by("ends_at"))


def window_for(agent: Any, now: datetime) -> MaintenanceWindow | None:
    """The open window covering `agent` that ends last (its corrections wait for that), or
    None. Two windows over one agent allow only what both allow."""
    covering = [w for w in windows_open(now) if w.covers(agent)]
    if not covering:
        return None
    last = covering[-1]
    allowed = set(covering[0].allowed)
    for window in covering[1:]:
        allowed &= set(window.allowed)
    last.allowed = sorted(allowed)
    return last


def windows_about(agent: Any, now: datetime) -> list[MaintenanceWindow]:
    """The windows covering `agent` that are open or still to come (for its page)."""
    return [w for w in MaintenanceWindow.objects.select_related("created_by").filter(
        cancelled_at__isnull=True, ends_at__gt=now).order_by("starts_at") if w.covers(agent)]
