from django.apps import AppConfig


class ComplianceConfig(AppConfig):
    """The stop button (a fleet, team, label selector or owner refused everything until two
    people lift it) and maintenance windows."""

    name = "compliance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The apps below compliance ask registry.holds whether a stop reaches an agent and
        # whether a maintenance window holds its corrections.
        from compliance import registrations  # apps.py loads before the models

        registrations.register()
