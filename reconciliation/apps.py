from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    """Observed state, drift, corrections, the reconcile loop and live alerts."""

    name = "reconciliation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from reconciliation import retention  # noqa: F401  (registers its start-up check)
