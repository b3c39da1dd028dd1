from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    """Observed state, drift, corrections, the reconcile loop and live alerts."""

    name = "reconciliation"
    default_auto_field = "django.db.models.BigAutoField"
