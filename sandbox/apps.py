from django.apps import AppConfig


class SandboxConfig(AppConfig):
    """The demo's simulated agent platform and the drift lab."""

    name = "sandbox"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from reconciliation import connectors  # apps.py loads before the models
        from sandbox.connector import SandboxConnector  # apps.py loads before the models

        # Agents whose spec names connector type sandbox are reached through it.
        connectors.register("sandbox", lambda agent: SandboxConnector())
