"""Recertification on real workers with the real scheduler: an agent approved with a review
date seconds away is reminded and then marked overdue by the jobs scheduled at approval (no
call from the test), suspended by its guardrail, and recertifying resumes it."""

from audit.models import AuditEntry
from reconciliation.models import AlertEvent, Escalation
from registry import actions
from registry.choices import VersionSource
from registry.jobs import check_reviews
from registry.models import Agent
from registry.recertification import ReviewOverride
from tests.conftest import eventually, refund_manifest


def recertified(agent: Agent) -> str:
    from reconciliation.models import AgentStatus

    status = AgentStatus.objects.filter(agent=agent).first()
    row = status.condition("Recertified") if status else None
    return row["status"] if row else ""


def test_the_review_date_passes_on_workers_and_recertifying_resets_it(people, start_worker):
    actions.create_guardrail(actor=people.dana, name="review-or-stop", expression="true",
                             effect="warn", message="reviewed", overdue_effect="suspend")
    worker = start_worker("reconcile", "default")
    (outcome,) = actions.apply_manifests([refund_manifest()], actor=people.alice,
                                         source=VersionSource.YAML)
    actions.approve_proposal(outcome.version.pk, actor=people.bob)
    first = Agent.objects.get(name="refund-agent")
    eventually(lambda: recertified(first) == "True", timeout=60, message=worker.output())
    # Medium risk: 180 days. Recertify at once with a date 6 seconds away.
    recert = actions.propose_recertification(
        "refund-agent", actor=people.alice, comment="short review cycle for the test",
        review=ReviewOverride(after_seconds=6))
    actions.approve_proposal(recert.version.pk, actor=people.bob)
    # The reminder (14 days ahead: at once) and the overdue check at the date, both scheduled.
    eventually(lambda: AlertEvent.objects.filter(event="recertification.due").exists(),
               timeout=60, message=worker.output())
    eventually(lambda: Agent.objects.get(name="refund-agent").overdue_at is not None,
               timeout=90, message=worker.output())
    agent = Agent.objects.get(name="refund-agent")
    assert agent.overdue_at >= agent.review_due_at
    assert agent.lifecycle == "suspended" and recertified(agent) == "False"
    escalation = Escalation.objects.get(agent=agent, subject="recertification")
    assert escalation.status == "open"
    assert check_reviews() == {"reminded": 0, "overdue": 0}  # the cron backstop finds no more

    again = actions.propose_recertification("refund-agent", actor=people.alice,
                                            comment="reviewed with payments")
    actions.approve_proposal(again.version.pk, actor=people.carol)
    agent.refresh_from_db()
    assert agent.lifecycle == "active"
    # A reconcile pass on the worker may hold the status row at this moment; it (or the pass
    # the approval requested) writes the condition from the agent as committed.
    eventually(lambda: recertified(agent) == "True", timeout=60, message=worker.output())
    assert agent.overdue_at is None and agent.review_due_at > escalation.opened_at
    escalation.refresh_from_db()
    assert escalation.status == "resolved" and escalation.resolution == "recertified"
    steps = list(AuditEntry.objects.filter(agent="refund-agent").values_list("action",
                                                                               flat=True))
    for step in ("recertification.proposed", "agent.recertified", "recertification.due",
                 "recertification.overdue", "agent.suspended", "agent.resumed"):
        assert step in steps, step


def test_the_cron_backstop_finds_a_date_whose_job_was_lost(people, transactional_db):
    from datetime import timedelta

    from django.utils import timezone

    (outcome,) = actions.apply_manifests([refund_manifest()], actor=people.alice,
                                         source=VersionSource.YAML)
    actions.approve_proposal(outcome.version.pk, actor=people.bob)
    Agent.objects.filter(name="refund-agent").update(
        review_due_at=timezone.now() - timedelta(seconds=1))  # its scheduled jobs never ran
    assert check_reviews() == {"reminded": 1, "overdue": 1}
    assert check_reviews() == {"reminded": 0, "overdue": 0}
    assert recertified(Agent.objects.get(name="refund-agent")) == "False"
