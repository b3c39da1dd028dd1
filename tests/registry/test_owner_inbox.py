"""The owner's reminder in the inbox: alice sees "recertify <agent> by <date>" for her own agents
once the reminder time has come (overdue first), counted in her badge, with a link to the
agent page's recertify form; bob (an approver) does not see alice's reminder; it is gone once a
recertification is proposed or the review date moves away."""

from datetime import timedelta

import pytest
from django.utils import timezone

from registry import actions
from registry.choices import VersionSource
from registry.models import Agent
from tests.conftest import approved_agent, make_person, refund_manifest


def due_in(agent: Agent, **delta) -> Agent:
    """Move the agent's review date (as a recertification or compliance would)."""
    Agent.objects.filter(pk=agent.pk).update(review_due_at=timezone.now() + timedelta(**delta))
    return Agent.objects.get(pk=agent.pk)


def reminders(client) -> list[dict]:
    answer = client.get("/api/v1/inbox")
    assert answer.status_code == 200, answer.content
    return [i for i in answer.json()["items"] if i["kind"] == "recertification"]


@pytest.mark.django_db
def test_alice_sees_her_agents_to_recertify_overdue_first_and_bob_does_not(people, api_as):
    soon = due_in(approved_agent(people, "refund-agent"), days=3)
    late = due_in(approved_agent(people, "payouts-agent"), hours=-2)
    due_in(approved_agent(people, "billing-agent"), days=90)  # its reminder time has not come
    alice = api_as(people.alice)

    answer = alice.get("/api/v1/inbox").json()
    shown = reminders(alice)
    assert [i["agent"] for i in shown] == ["payouts-agent", "refund-agent"]  # overdue first
    assert answer["recertifications"] == 2 and answer["total"] == 2
    overdue, coming = shown
    assert overdue["seconds_left"] < 0 and overdue["severity"] == "high"
    assert 2 * 86400 < coming["seconds_left"] <= 3 * 86400
    assert coming["deadline"] == soon.review_due_at.isoformat()
    assert coming["what"] == f"recertify refund-agent by {soon.review_due_at:%Y-%m-%d %H:%M} UTC"
    assert coming["link"] == "/agents/refund-agent/#recertify-comment"
    assert overdue["key"] == f"recertification-{late.pk}-{int(late.review_due_at.timestamp())}"
    only = alice.get("/api/v1/inbox?kind=recertification").json()["items"]
    assert [i["agent"] for i in only] == ["payouts-agent", "refund-agent"]

    assert reminders(api_as(people.bob)) == []  # bob decides; alice's reminder is hers
    assert api_as(people.bob).get("/api/v1/inbox").json()["recertifications"] == 0
    oscar = make_person("oscar", "owner")  # another owner: nothing of alice's
    assert reminders(api_as(oscar)) == []
    assert api_as(people.dana).get("/api/v1/inbox").status_code == 403  # compliance


@pytest.mark.django_db
def test_an_owner_sees_only_reminders_not_the_approvers_queue(people, api_as):
    due_in(approved_agent(people, "refund-agent"), days=1)
    other = refund_manifest()  # alice proposes a new agent: bob's to decide, not in her inbox
    object.__setattr__(other, "name", "new-agent")
    actions.apply_manifests([other], actor=people.alice, source=VersionSource.YAML)
    kinds = [i["kind"] for i in api_as(people.alice).get("/api/v1/inbox").json()["items"]]
    assert kinds == ["recertification"]
    assert "proposal" in [i["kind"] for i in api_as(people.bob).get("/api/v1/inbox").json()[
        "items"]]


@pytest.mark.django_db
def test_the_reminder_goes_once_a_recertification_is_proposed_or_the_date_moves(people,
                                                                                  api_as):
    agent = due_in(approved_agent(people, "refund-agent"), days=2)
    alice = api_as(people.alice)
    assert len(reminders(alice)) == 1
    proposed = alice.post("/api/v1/agents/refund-agent/recertify", {}, format="json")
    assert proposed.status_code in (200, 201), proposed.content
    assert reminders(alice) == []

    due_in(approved_agent(people, "payouts-agent"), days=2)
    assert [i["agent"] for i in reminders(alice)] == ["payouts-agent"]
    due_in(Agent.objects.get(name="payouts-agent"), days=100)  # the date moved away
    assert reminders(alice) == []
    assert agent.pk  # the first agent is still there, only its reminder is gone


@pytest.mark.django_db
def test_alice_has_the_inbox_in_her_navigation_with_the_count(people, client):
    due_in(approved_agent(people, "refund-agent"), days=1)
    client.force_login(people.alice)
    page = client.get("/inbox/")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'id="inbox-count"' in body and ">1</span>" in body
    assert "recertify refund-agent by" in body
    assert 'href="/agents/refund-agent/#recertify-comment"' in body
    assert "Assign to me" not in body  # triage is an approver's
    client.force_login(people.dana)
    assert client.get("/inbox/").status_code == 403


@pytest.mark.django_db
def test_an_owner_with_an_inbox_still_cannot_triage_the_approvers_queue(people, client,
                                                                        api_as):
    due_in(approved_agent(people, "refund-agent"), days=1)
    answer = api_as(people.alice).post("/api/v1/inbox/triage", {"escalations": [1],
                                                                "assign": True}, format="json")
    assert answer.status_code == 403
    client.force_login(people.alice)
    assert client.post("/inbox/triage", {"escalation": ["1"], "bulk": "assign"}).status_code == 403
