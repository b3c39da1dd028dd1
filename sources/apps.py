from django.apps import AppConfig


class SourcesConfig(AppConfig):
    """Permission sources: agents' grants read and corrected where they are made."""

    name = "sources"
    default_auto_field = "django.db.models.BigAutoField"
