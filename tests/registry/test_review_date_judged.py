"""A review date is judged like the change it stands for (issue 29 items 4 and 5).

An agent's own token set its next review ten years out (`review_after: 3650d` on a version
bump, risk 0), any approved change cleared an overdue, restricted state, and the date was on
neither the approver's proposal page, nor in the risk, nor in the audit trail."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from registry.actions.recertification import mark_overdue
from registry.models import Agent, DesiredStateVersion
from tests.conftest import approved_agent, refund_manifest, token_client


def later(agent: Agent, **delta):
    return Agent.objects.get(pk=agent.pk).review_due_at + timedelta(**delta)


def guardrail(client, **fields) -> None:
    body = {"name": "prod-review", "expression": "true", "effect": "warn",
            "message": "reviewed", "selector": {}, **fields}
    answer = client.post("/api/v1/guardrails", body, format="json")
    assert answer.status_code == 201, answer.json()


@pytest.mark.django_db
@pytest.mark.parametrize("body", [{"review_after": "3650d"}, {"review_after": "1d"},
                                  {"review_by": "2036-01-01T00:00:00Z"}])
def test_an_agents_own_token_cannot_set_its_review_date(people, body):
    agent = approved_agent(people, "refund-agent")
    due = agent.review_due_at
    spec = refund_manifest(version="2.3.1").spec
    answer = token_client(people, agent).post("/api/v1/agents/refund-agent/proposals",
                                              {"spec": spec, **body}, format="json")
    assert answer.status_code == 403, answer.json()
    assert answer.json()["error"]["code"] == "review_date_not_allowed"
    assert not DesiredStateVersion.objects.filter(state="pending").exists()
    assert Agent.objects.get(pk=agent.pk).review_due_at == due


@pytest.mark.django_db
def test_the_agents_token_may_still_propose_without_a_review_date(people):
    agent = approved_agent(people, "refund-agent")
    spec = refund_manifest(version="2.3.1").spec
    answer = token_client(people, agent).post("/api/v1/agents/refund-agent/proposals",
                                              {"spec": spec}, format="json")
    assert answer.status_code == 201, answer.json()
    assert not [c for c in answer.json()["changes"] if c["area"] == "review"]


@pytest.mark.django_db
def test_a_later_review_date_is_scored_shown_and_audited(people, api_as, client):
    approved_agent(people, "refund-agent")
    spec = refund_manifest(version="2.3.1").spec
    alice = api_as(people.alice)
    proposed = alice.post("/api/v1/agents/refund-agent/proposals",
                          {"spec": spec, "review_after": "3650d"}, format="json")
    assert proposed.status_code == 201, proposed.json()
    body = proposed.json()
    review = [c for c in body["changes"] if c["area"] == "review"]
    assert [(c["risk"], c["after"]) for c in review] == [("widening", 3650 * 86_400)]
    assert "3650d" in review[0]["text"] and body["risk"] >= 10
    entry = AuditEntry.objects.filter(action="proposal.created").latest("pk")
    assert "3650d" in entry.reason
    # the approver's page says so
    client.force_login(people.bob)
    page = client.get(f"/proposals/{body['proposal']}/").content.decode()
    assert "Next review" in page and "3650d after approval" in page
    # approved: the trail says which date it set and where it came from
    approved = api_as(people.bob).post(f"/api/v1/proposals/{body['proposal']}/approve", {},
                                       format="json")
    assert approved.status_code == 200, approved.json()
    row = AuditEntry.objects.filter(action="agent.review_date_set").latest("pk")
    assert row.after["from"] == "override" and row.actor == "bob"


@pytest.mark.django_db
def test_a_sooner_review_date_narrows_and_the_policy_date_is_no_change(people, api_as):
    approved_agent(people, "refund-agent")  # medium: 180d
    alice = api_as(people.alice)
    sooner = alice.post("/api/v1/agents/refund-agent/proposals",
                        {"spec": refund_manifest(version="2.3.1").spec, "review_after": "30d"},
                        format="json").json()
    assert [c["risk"] for c in sooner["changes"] if c["area"] == "review"] == ["narrowing"]
    same = alice.post("/api/v1/agents/refund-agent/proposals",
                      {"spec": refund_manifest(version="2.3.2").spec, "review_after": "180d"},
                      format="json").json()
    assert [c for c in same["changes"] if c["area"] == "review"] == []
    assert same["risk"] == 0


@pytest.mark.django_db
def test_an_approved_change_leaves_an_overdue_restricted_agent_overdue(people, api_as):
    agent = approved_agent(people, "refund-agent")
    guardrail(api_as(people.dana), overdue_effect="restrict", safe_tools=["orders.lookup"])
    mark_overdue(agent.pk, now=later(agent, seconds=1))
    overdue = Agent.objects.get(pk=agent.pk)
    assert overdue.restricted_to == ["orders.lookup"]
    alice, bob = api_as(people.alice), api_as(people.bob)
    bump = alice.post("/api/v1/agents/refund-agent/proposals",
                      {"spec": refund_manifest(version="2.3.1").spec}, format="json").json()
    assert bob.post(f"/api/v1/proposals/{bump['proposal']}/approve", {},
                    format="json").status_code == 200
    after = Agent.objects.get(pk=agent.pk)
    assert after.generation == overdue.generation + 1
    assert (after.overdue_at, after.restricted_to, after.review_due_at) == (
        overdue.overdue_at, ["orders.lookup"], overdue.review_due_at)
    own = token_client(people, agent)
    decision = own.post("/api/v1/agents/refund-agent/decisions", {"tool": "payments.refund"},
                        format="json").json()
    assert decision["outcome"] == "deny"
    # the recertification itself lifts it
    recert = alice.post("/api/v1/agents/refund-agent/recertify", {"comment": "still fine"},
                        format="json").json()
    assert bob.post(f"/api/v1/proposals/{recert['proposal']}/approve", {},
                    format="json").status_code == 200
    lifted = Agent.objects.get(pk=agent.pk)
    assert lifted.overdue_at is None and lifted.restricted_to is None
    assert lifted.review_due_at > timezone.now()
