"""What an agent did can be read back: `GET /api/v1/agents/{name}/events` (newest first, a page
at a time, by kind and time) and the recent events on the agent's page, for the agent itself,
its owner, approvers and compliance; another owner and another agent are refused."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from tests.conftest import approved_agent, make_person, token_client

PATH = "/api/v1/agents/refund-agent/events"


def event(kind: str, minutes_ago: int, **fields) -> dict:
    return {"id": uuid.uuid4().hex, "agent": "refund-agent", "kind": kind,
            "ts": (datetime.now(UTC) - timedelta(minutes=minutes_ago)).isoformat(), **fields}


def person(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def reported(people):
    """The refund agent after it reported a lookup, a refund and a read, oldest first."""
    agent = approved_agent(people, "refund-agent")
    client = token_client(people, agent)
    sent = [event("tool_call", 30, tool="orders.lookup"),
            event("action", 20, action="payments.refund", amount="120.50"),
            event("data_access", 10, resource="orders_db", record="A-1")]
    answer = client.post("/api/v1/events", sent, format="json").json()
    assert answer["accepted"] == 3, answer
    return agent, client, sent


@pytest.mark.django_db
def test_the_agent_reads_back_what_it_did_newest_first(reported):
    agent, client, sent = reported
    page = client.get(PATH).json()
    assert page["count"] == 3
    assert [row["id"] for row in page["results"]] == [e["id"] for e in reversed(sent)]
    refund = page["results"][1]
    assert (refund["kind"], refund["action"], refund["amount"]) == ("action", "payments.refund",
                                                                    120.5)
    assert refund["sender"].startswith("agent:refund-agent")


@pytest.mark.django_db
def test_events_are_filtered_by_kind_and_time_and_paged(reported, people):
    agent, client, sent = reported
    dana = person(people.dana)
    refunds = dana.get(PATH, {"kind": "action"}).json()
    assert [row["id"] for row in refunds["results"]] == [sent[1]["id"]]
    since = (datetime.now(UTC) - timedelta(minutes=25)).isoformat()
    recent = dana.get(PATH, {"since": since}).json()
    assert [row["id"] for row in recent["results"]] == [sent[2]["id"], sent[1]["id"]]
    first = dana.get(PATH, {"page_size": 2}).json()
    assert len(first["results"]) == 2 and first["next"]
    second = dana.get(first["next"]).json()
    assert [row["id"] for row in second["results"]] == [sent[0]["id"]]


@pytest.mark.django_db
@pytest.mark.parametrize("query, pointer", [({"kind": "refund"}, "/kind"),
                                            ({"since": "yesterday"}, "/since"),
                                            ({"since": "2026-01-01T00:00:00"}, "/since")])
def test_a_filter_it_cannot_read_is_refused(reported, people, query, pointer):
    answer = person(people.alice).get(PATH, query)
    assert answer.status_code == 400
    assert answer.json()["error"]["details"][0]["pointer"] == pointer


@pytest.mark.django_db
def test_its_owner_approvers_and_compliance_read_them_and_nobody_else(reported, people):
    agent, _, _ = reported
    for user in (people.alice, people.bob, people.carol, people.dana):
        assert person(user).get(PATH).json()["count"] == 3, user.username
    erin = make_person("erin", "owner")
    assert person(erin).get(PATH).status_code == 403
    other = approved_agent(people, "other-agent")
    assert token_client(people, other).get(PATH).status_code == 403
    assert APIClient().get(PATH).status_code in (401, 403)
    assert person(people.alice).get("/api/v1/agents/nobody/events").status_code == 404


@pytest.mark.django_db
def test_the_agents_page_lists_its_recent_events_to_those_who_may_see_them(reported, people,
                                                                         client):
    agent, _, sent = reported
    client.force_login(people.alice)
    page = client.get("/agents/refund-agent/").content.decode()
    assert "Recent events" in page
    assert "payments.refund" in page and "orders.lookup" in page and "A-1" in page
    client.force_login(make_person("erin", "owner"))
    other = client.get("/agents/refund-agent/").content.decode()
    assert "Recent events" not in other and "A-1" not in other
