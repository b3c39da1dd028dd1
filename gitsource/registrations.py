"""What the Git source connects at start-up, from GitSourceConfig.ready: its gate on every
proposal and the commit statuses it reports at decision time."""

from django.db.models.signals import post_save

from gitsource.jobs import report_after_decision
from gitsource.managed import refuse_edits_outside_git
from registry.models import Approval, DesiredStateVersion
from registry.proposal_gates import register_gate


def register() -> None:
    """Once per process (each connection ignores a repeat)."""
    register_gate(refuse_edits_outside_git)
    # statuses at decision time (a side effect after commit, not an audit row)
    post_save.connect(report_after_decision, sender=DesiredStateVersion,
                      dispatch_uid="gitsource-report-after-decision")
    post_save.connect(report_after_decision, sender=Approval,
                      dispatch_uid="gitsource-report-after-approval")
