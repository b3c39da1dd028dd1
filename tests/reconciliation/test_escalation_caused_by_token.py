"""Four eyes over what an agent token did (issue 29, item 12): an admin may issue a token for
anyone's agent; when he breaks an action limit through it, the escalation it opens names him
as its cause, and he may neither close nor triage it, nor find it in his queue. Another
approver closes it. The same holds for a runtime decision he asked for through the token."""

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEntry
from reconciliation.inbox import escalations_for_user
from reconciliation.models import Escalation
from registry import actions as registry_actions
from tests.conftest import approved_agent
from tests.reconciliation.test_behaviour_escalations import SUPPORT, refund, resolve, send

pytestmark = pytest.mark.django_db


@pytest.fixture
def admins_token(people, redis_client) -> APIClient:
    """alice's refund agent (actions: escalate) and a token for it the admin issued himself."""
    agent = approved_agent(people, "refund-agent", **SUPPORT)
    _, key = registry_actions.issue_agent_token(agent, actor=people.admin)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_the_admin_cannot_close_the_escalation_his_own_token_caused(
        people, api_as, admins_token, django_capture_on_commit_callbacks):
    send(admins_token, [refund(9000)], django_capture_on_commit_callbacks)  # max is 5000
    escalation = Escalation.objects.get(status="open")
    assert escalation.caused_by == people.admin
    admin = api_as(people.admin)
    for verb in ("acknowledge", "suspend"):
        refused = resolve(admin, escalation, verb, "fine, I did it")
        assert refused.status_code == 403, refused.json()
        assert refused.json()["error"]["code"] == "four_eyes"
    for body in ({"snooze_minutes": 60}, {"assign": True}, {"acknowledge": True}):
        triage = admin.post(f"/api/v1/escalations/{escalation.pk}/triage", body, format="json")
        assert triage.status_code == 403, (body, triage.content)
    escalation.refresh_from_db()
    assert escalation.status == "open" and escalation.snoozed_until is None
    assert escalation.assignee is None
    assert not AuditEntry.objects.filter(action="escalation.resolved").exists()
    assert escalation not in escalations_for_user(people.admin)
    assert escalation in escalations_for_user(people.bob)
    closed = resolve(api_as(people.bob), escalation, "acknowledge", "one-off, checked")
    assert closed.status_code == 200, closed.json()


def test_a_decision_asked_through_his_token_is_not_his_to_answer(people, api_as, admins_token):
    asked = admins_token.post("/api/v1/agents/refund-agent/decisions",
                              {"action": "payments.refund", "amount": 800}, format="json")
    assert asked.status_code in (200, 201, 202), asked.json()
    assert asked.json()["outcome"] == "pending"
    escalation = Escalation.objects.get(decision_id=asked.json()["id"])
    refused = resolve(api_as(people.admin), escalation, "allow", "mine")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "four_eyes"
    assert resolve(api_as(people.carol), escalation, "allow", "checked").status_code == 200


def test_an_approver_who_caused_nothing_still_resolves(people, api_as, redis_client,
                                                       django_capture_on_commit_callbacks):
    agent = approved_agent(people, "refund-agent", **SUPPORT)
    _, key = registry_actions.issue_agent_token(agent, actor=people.alice)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    send(client, [refund(9000)], django_capture_on_commit_callbacks)
    escalation = Escalation.objects.get(status="open")
    assert escalation.caused_by == people.alice  # the owner: four eyes already keeps her out
    assert resolve(api_as(people.admin), escalation, "acknowledge",
                   "reviewed").status_code == 200
