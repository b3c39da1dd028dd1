from django.apps import AppConfig


class AuditConfig(AppConfig):
    """The hash-chained, append-only audit trail."""

    name = "audit"
    default_auto_field = "django.db.models.BigAutoField"
