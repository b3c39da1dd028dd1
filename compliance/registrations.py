"""What compliance hands the apps below it, from ComplianceConfig.ready: registry.holds' answers
(whether a stop reaches an agent, whether a maintenance window holds its corrections)."""

from compliance import stops
from compliance.actions import maintenance
from registry import holds


def register() -> None:
    """Once per process."""
    holds.register(stop_reason=stops.stop_reason, held_by_stop=stops.held_by_stop,
                   hold_for_window=maintenance.hold_in_open_window)
