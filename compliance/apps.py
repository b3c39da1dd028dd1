from django.apps import AppConfig


class ComplianceConfig(AppConfig):
    """The stop button (a fleet, team, label selector or owner refused everything until two
    people lift it) and maintenance windows."""

    name = "compliance"
    default_auto_field = "django.db.models.BigAutoField"
