"""The compliance app's jobs: thin, they take ids and call actions."""

from compliance.actions.maintenance import end_window
from compliance.actions.platforms import release_on_platforms, suspend_on_platforms


def enforce_stop_job(stop_id: int) -> dict[str, list[str]]:
    """Suspend a stop's agents on their platforms through their connectors."""
    return suspend_on_platforms(stop_id)


def release_stop_job(stop_id: int) -> dict[str, list[str]]:
    """Resume a lifted stop's agents on their platforms (those still active here)."""
    return release_on_platforms(stop_id)


def end_window_job(window_id: int) -> bool:
    """A maintenance window's end, recorded (held corrections come back on their own pass)."""
    return end_window(window_id)
