from django.apps import AppConfig


class GitSourceConfig(AppConfig):
    """Desired state from Git: sources, signing keys, the poller and sync status."""

    name = "gitsource"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from gitsource.managed import refuse_edits_outside_git
        from registry.proposal_gates import register_gate

        register_gate(refuse_edits_outside_git)
