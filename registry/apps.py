from django.apps import AppConfig


class RegistryConfig(AppConfig):
    """People, roles, API tokens and (later) agents and their desired state."""

    name = "registry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from registry import signin_audit  # noqa: F401  (connects the auth signal receivers)
