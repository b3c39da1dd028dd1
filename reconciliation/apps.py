from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    """Observed state, drift, corrections, the reconcile loop and live alerts."""

    name = "reconciliation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from reconciliation import registrations  # apps.py loads before the models

        registrations.register()
