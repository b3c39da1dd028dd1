from django.apps import AppConfig


class GitSourceConfig(AppConfig):
    """Desired state from Git: sources, signing keys, the poller and sync status."""

    name = "gitsource"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from gitsource import registrations  # apps.py loads before the models

        registrations.register()
