from django.apps import AppConfig


class GitSourceConfig(AppConfig):
    """Desired state from Git: sources, signing keys, the poller and sync status."""

    name = "gitsource"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_save  # apps.py loads before the models

        from gitsource.jobs import report_after_decision  # apps.py loads before the models
        from gitsource.managed import refuse_edits_outside_git  # apps.py loads before the models
        from registry.models import Approval, DesiredStateVersion  # apps.py loads before the models
        from registry.proposal_gates import register_gate  # apps.py loads before the models

        register_gate(refuse_edits_outside_git)
        # statuses at decision time (a side effect after commit, not an audit row)
        post_save.connect(report_after_decision, sender=DesiredStateVersion,
                          dispatch_uid="gitsource-report-after-decision")
        post_save.connect(report_after_decision, sender=Approval,
                          dispatch_uid="gitsource-report-after-approval")
