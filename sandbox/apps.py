from django.apps import AppConfig


class SandboxConfig(AppConfig):
    """The demo's simulated agent platform and the drift lab."""

    name = "sandbox"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from sandbox import connector  # apps.py loads before the models

        connector.register()  # agents whose spec names connector type sandbox reach it
