"""A hand-over ends the old owner's pending retirement (issue 29 item 9): alice proposed to
retire her agent, handed it to oscar, and the retirement she proposed still retired oscar's
agent when an approver approved it."""

import pytest

from audit.models import AuditEntry
from registry.models import Agent, Retirement
from tests.conftest import REFUND_AGENT_YAML, make_person


@pytest.fixture
def oscar(db):
    from registry.choices import Role

    return make_person("oscar", Role.OWNER)


def hand_over(api_as, people, to: str) -> None:
    handover = REFUND_AGENT_YAML.replace("owner: alice", f"owner: {to}")
    proposed = api_as(people.alice).generic("POST", "/api/v1/manifests", handover,
                                            content_type="application/yaml")
    assert proposed.status_code == 201, proposed.content
    proposal = proposed.json()["results"][0]["proposal"]
    approved = api_as(people.bob).post(f"/api/v1/proposals/{proposal}/approve", {},
                                       format="json")
    assert approved.status_code == 200, approved.content


@pytest.mark.django_db
def test_a_hand_over_supersedes_the_old_owners_pending_retirement(api_as, people, oscar,
                                                                   refund_agent):
    proposed = api_as(people.alice).post("/api/v1/agents/refund-agent/retirement",
                                         {"reason": "no longer needed"}, format="json")
    assert proposed.status_code == 201, proposed.content
    retirement = proposed.json()["id"]
    hand_over(api_as, people, "oscar")

    approve = api_as(people.carol).post(f"/api/v1/retirements/{retirement}/approve", {},
                                        format="json")
    assert approve.status_code == 409, approve.content
    assert Agent.objects.get(name="refund-agent").lifecycle != "retired"
    assert Retirement.objects.get(pk=retirement).state == "superseded"
    entry = AuditEntry.objects.get(action="retirement.superseded")
    assert entry.target == f"retirement:{retirement}" and "oscar" in entry.reason
    # the new owner may propose a retirement of his own, and it is decided as usual
    again = api_as(oscar).post("/api/v1/agents/refund-agent/retirement",
                               {"reason": "mine now, and done"}, format="json")
    assert again.status_code == 201, again.content


@pytest.mark.django_db
def test_a_change_that_keeps_the_owner_leaves_a_pending_retirement_alone(api_as, people,
                                                                       refund_agent):
    proposed = api_as(people.alice).post("/api/v1/agents/refund-agent/retirement",
                                         {"reason": "no longer needed"}, format="json")
    retirement = proposed.json()["id"]
    changed = REFUND_AGENT_YAML.replace('version: "2.3.0"', 'version: "2.3.1"')
    made = api_as(people.alice).generic("POST", "/api/v1/manifests", changed,
                                        content_type="application/yaml")
    proposal = made.json()["results"][0]["proposal"]
    assert api_as(people.bob).post(f"/api/v1/proposals/{proposal}/approve", {},
                                   format="json").status_code == 200
    assert Retirement.objects.get(pk=retirement).state == "pending"
    assert not AuditEntry.objects.filter(action="retirement.superseded").exists()
