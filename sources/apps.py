from django.apps import AppConfig


class SourcesConfig(AppConfig):
    """Permission sources: agents' grants read and corrected where they are made."""

    name = "sources"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from reconciliation.connectors import at_source  # apps.py loads before the models
        from sources import actions  # apps.py loads before the models

        # The loop's witnessed connector reads and corrects grants at their source through these.
        at_source.register(read_source=actions.read_source,
                           correct_at_source=actions.correct_at_source,
                           correct_tool_at_source=actions.correct_tool_at_source)
