from django.apps import AppConfig

from registry import holds


class ComplianceConfig(AppConfig):
    """The stop button (a fleet, team, label selector or owner refused everything until two
    people lift it) and maintenance windows."""

    name = "compliance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from compliance import stops  # apps.py loads before the models
        from compliance.actions import maintenance  # apps.py loads before the models

        # The apps below compliance ask registry.holds whether a stop reaches an agent and
        # whether a maintenance window holds its corrections.
        holds.register(stop_reason=stops.stop_reason, held_by_stop=stops.held_by_stop,
                       hold_for_window=maintenance.hold_in_open_window)
