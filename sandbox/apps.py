from django.apps import AppConfig


class SandboxConfig(AppConfig):
    """The demo's simulated agent platform and the drift lab."""

    name = "sandbox"
    default_auto_field = "django.db.models.BigAutoField"
