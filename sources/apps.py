from django.apps import AppConfig


class SourcesConfig(AppConfig):
    """Permission sources: agents' grants read and corrected where they are made."""

    name = "sources"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The loop's witnessed connector reads and corrects grants at their source through these.
        from sources import registrations  # apps.py loads before the models

        registrations.register()
