"""A pending decision is an escalation: the agent's health says "escalated" while a human is
awaited and goes back as soon as the decision is answered or expires, without waiting for a
report from the agent (a converged agent's sidecar reports only when something changes, so
none would come)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.controller.work_queue import QUEUED_KEY
from reconciliation.models import AgentStatus, Escalation
from runtime.actions import decisions
from runtime.models import Decision
from tests.conftest import approved_with_client
from tests.reconciliation.test_heartbeats import PUSH, report_of


def converged_agent(people, redis_client, capture):
    agent, client = approved_with_client(people, **PUSH)
    with capture(execute=True):
        assert client.put(f"/api/v1/agents/{agent.name}/observed-state", report_of(agent),
                          format="json").status_code == 202
    assert actions.reconcile_agent(agent.pk, trigger="observation").result == "converged"
    redis_client.delete(QUEUED_KEY.format(agent_id=agent.pk))
    return agent, client


def ask_for_sign_off(agent, client, capture) -> str:
    with capture(execute=True):
        answer = client.post(f"/api/v1/agents/{agent.name}/decisions",
                             {"tool": "payments.refund", "arguments": {"amount": 640}},
                             format="json").json()
    assert answer["outcome"] == "pending", answer
    return answer["id"]


def health(agent) -> str:
    return AgentStatus.objects.get(agent=agent).health


@pytest.mark.django_db
def test_answering_a_decision_ends_the_escalated_health_at_once(
        people, redis_client, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    agent, client = converged_agent(people, redis_client, capture)
    assert health(agent) == "in_policy"
    decision_id = ask_for_sign_off(agent, client, capture)
    assert health(agent) == "escalated"  # before any pass
    # A pass while the human is awaited: not converged, as the loop sees it.
    actions.reconcile_agent(agent.pk, trigger="resync")
    assert (health(agent), AgentStatus.objects.get(agent=agent).converged) == ("escalated", False)
    queued = QUEUED_KEY.format(agent_id=agent.pk)
    redis_client.delete(queued)

    with capture(execute=True):
        decisions.decide_pending(decision_id, actor=people.carol, allow=True,
                                 comment="damaged order confirmed")
    assert health(agent) == "in_policy"
    assert redis_client.exists(queued)  # and a pass to settle it, asked by nobody else
    assert actions.reconcile_agent(agent.pk, trigger="escalation").result == "converged"
    assert AgentStatus.objects.get(agent=agent).converged


@pytest.mark.django_db
@pytest.mark.parametrize("answer", ["deny", "expire"])
def test_a_denied_or_expired_decision_ends_it_too(people, redis_client, answer,
                                                  django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    agent, client = converged_agent(people, redis_client, capture)
    decision_id = ask_for_sign_off(agent, client, capture)
    actions.reconcile_agent(agent.pk, trigger="resync")
    assert health(agent) == "escalated"
    queued = QUEUED_KEY.format(agent_id=agent.pk)
    redis_client.delete(queued)
    with capture(execute=True):
        if answer == "deny":
            decisions.decide_pending(decision_id, actor=people.carol, allow=False,
                                     comment="not damaged")
        else:
            assert decisions.expire_decision(decision_id,
                                             now=timezone.now() + timedelta(hours=1))
    assert health(agent) == "in_policy"
    assert redis_client.exists(queued)


@pytest.mark.django_db
def test_a_decision_is_asked_whole_or_not_at_all(people, monkeypatch):
    """The decision, its escalation and their audit rows are one transaction: a pending
    decision no approver can see (no escalation), or one the trail never recorded, cannot be
    left behind by a failure half-way."""
    agent, _ = approved_with_client(people, **PUSH)

    def failing_alert(*args, **kwargs):
        raise RuntimeError("the alert could not be written")

    monkeypatch.setattr(decisions, "alert", failing_alert)
    trail = AuditEntry.objects.count()
    with pytest.raises(RuntimeError):
        decisions.request_decision(agent, {"tool": "payments.refund",
                                           "arguments": {"amount": 640}}, actor=people.alice)
    assert not Decision.objects.exists() and not Escalation.objects.exists()
    assert AuditEntry.objects.count() == trail
