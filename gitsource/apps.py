from django.apps import AppConfig


class GitSourceConfig(AppConfig):
    """Desired state from Git: sources, signing keys, the poller and sync status."""

    name = "gitsource"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from gitsource.jobs import report_after_decision
        from gitsource.managed import refuse_edits_outside_git
        from registry.models import Approval, DesiredStateVersion
        from registry.proposal_gates import register_gate

        register_gate(refuse_edits_outside_git)
        # statuses at decision time (a side effect after commit, not an audit row)
        post_save.connect(report_after_decision, sender=DesiredStateVersion,
                          dispatch_uid="gitsource-report-after-decision")
        post_save.connect(report_after_decision, sender=Approval,
                          dispatch_uid="gitsource-report-after-approval")
