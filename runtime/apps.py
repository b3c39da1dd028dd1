from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    """What agents do: behaviour events, rule windows, runtime decisions, group rules."""

    name = "runtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runtime import registrations  # apps.py loads before the models

        registrations.register()
