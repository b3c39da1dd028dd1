"""Rolling back through the API: an earlier approved generation proposed again in one call,
shown as the diff from the current one, approved like any change, and refused to everyone
who may not propose for the agent."""

import pytest

from audit.models import AuditEntry
from registry.models import Agent, DesiredStateVersion
from tests.conftest import approved_agent, refund_manifest, token_client

pytestmark = pytest.mark.django_db


def at_generation_two(people):
    """The refund agent at generation 2: the $500 refund rule raised to $2000."""
    agent = approved_agent(people, "refund-agent")
    from registry import actions

    outcome = actions.propose(
        agent, refund_manifest(actions={"payments.refund": {"approval_above": 2000,
                                                            "max": 5000}}).spec,
        agent.active_version.metadata, actor=people.alice, source="api")
    actions.approve_proposal(outcome.version.pk, actor=people.bob)
    return Agent.objects.get(pk=agent.pk)


def snapshot() -> tuple:
    return (list(Agent.objects.values_list("name", "generation", "active_version_id")),
            DesiredStateVersion.objects.count(), AuditEntry.objects.count())


def test_rolling_back_proposes_generation_one_again_and_approval_makes_it_generation_three(
        people, api_as):
    agent = at_generation_two(people)
    first = agent.versions.get(generation=1)
    response = api_as(people.alice).post("/api/v1/agents/refund-agent/rollback",
                                         {"generation": 1, "comment": "the $2000 rule leaks"},
                                         format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["action"] == "proposed" and body["state"] == "pending"
    # The diff is from the current generation (2) back to 1: the threshold comes down.
    assert [(d["pointer"], d["before"], d["after"]) for d in body["diff"]] == [
        ("/actions/payments.refund/approval_above", 2000, 500)]
    assert Agent.objects.get(pk=agent.pk).generation == 2  # nothing changes before approval

    approved = api_as(people.bob).post(f"/api/v1/proposals/{body['proposal']}/approve",
                                       {"comment": "yes"}, format="json")
    assert approved.status_code == 200, approved.json()
    agent.refresh_from_db()
    assert agent.generation == 3
    assert agent.active_version.spec == first.spec
    assert agent.active_version.spec_sha256 == first.spec_sha256
    entry = AuditEntry.objects.get(action="rollback.proposed")
    assert (entry.actor, entry.agent, entry.reason) == ("alice", "refund-agent",
                                                        "the $2000 rule leaks")
    assert (entry.before, entry.after) == ({"generation": 2},
                                           {"generation": 1, "proposal": body["proposal"]})


def test_the_owner_cannot_approve_their_own_rollback(people, api_as):
    from registry import actions

    actions.grant_role(people.alice, "approver", actor="system:test")
    at_generation_two(people)
    proposal = api_as(people.alice).post("/api/v1/agents/refund-agent/rollback",
                                         {"generation": 1}, format="json").json()["proposal"]
    response = api_as(people.alice).post(f"/api/v1/proposals/{proposal}/approve", {},
                                         format="json")
    assert response.status_code == 403 and response.json()["error"]["code"] == "four_eyes"
    assert Agent.objects.get(name="refund-agent").generation == 2


@pytest.mark.parametrize("body, status, pointer", [
    ({"generation": 7}, 422, "/generation"),        # never approved
    ({"generation": 0}, 400, "/generation"),
    ({"generation": "one"}, 400, "/generation"),
    ({}, 400, "/generation"),
    ({"generation": 2**40}, 400, "/generation"),
    ({"generation": 1, "comment": "x" * 2001}, 400, "/comment"),
])
def test_bad_rollback_requests_change_nothing(people, api_as, body, status, pointer):
    at_generation_two(people)
    alice = api_as(people.alice)
    before = snapshot()
    response = alice.post("/api/v1/agents/refund-agent/rollback", body, format="json")
    assert response.status_code == status, response.json()
    assert pointer in [d["pointer"] for d in response.json()["error"]["details"]]
    assert snapshot() == before


def test_rolling_back_to_the_active_generation_or_twice_is_a_conflict(people, api_as):
    at_generation_two(people)
    alice = api_as(people.alice)
    before = snapshot()
    same = alice.post("/api/v1/agents/refund-agent/rollback", {"generation": 2}, format="json")
    assert same.status_code == 409 and snapshot() == before
    assert alice.post("/api/v1/agents/refund-agent/rollback", {"generation": 1},
                      format="json").status_code == 201
    before = snapshot()
    again = alice.post("/api/v1/agents/refund-agent/rollback", {"generation": 1}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "unchanged"
    assert snapshot() == before


def test_a_rejected_proposal_cannot_be_rolled_back_to(people, api_as):
    from registry import actions

    agent = at_generation_two(people)
    rejected = actions.propose(agent, refund_manifest(model="gpt-5").spec,
                               agent.active_version.metadata, actor=people.alice, source="api")
    actions.reject_proposal(rejected.version.pk, actor=people.bob, comment="no")
    alice = api_as(people.alice)
    before = snapshot()
    # Generation numbers only name approved versions; a rejected proposal has none to name.
    response = alice.post("/api/v1/agents/refund-agent/rollback",
                                         {"generation": 3}, format="json")
    assert response.status_code == 422 and snapshot() == before


@pytest.mark.parametrize("generation", [1, 7])  # 7 was never approved: refused all the same
@pytest.mark.parametrize("who", ["bob", "dana", "other_owner", "anonymous", "agent_token"])
def test_only_the_agents_owner_may_roll_it_back(people, api_as, who, generation):
    from rest_framework.test import APIClient

    from tests.conftest import make_person

    agent = at_generation_two(people)
    clients = {
        "bob": lambda: api_as(people.bob),
        "dana": lambda: api_as(people.dana),
        "other_owner": lambda: api_as(make_person("erin", "owner")),
        "anonymous": APIClient,
        "agent_token": lambda: token_client(people, agent),
    }
    client = clients[who]()
    before = snapshot()
    response = client.post("/api/v1/agents/refund-agent/rollback",
                           {"generation": generation}, format="json")
    assert response.status_code in (401, 403), response.json()
    assert snapshot() == before


def test_rolling_back_an_unknown_agent_is_not_found(people, api_as):
    response = api_as(people.alice).post("/api/v1/agents/nobody/rollback", {"generation": 1},
                                         format="json")
    assert response.status_code == 404
