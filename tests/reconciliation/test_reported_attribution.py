"""Attribution an agent reports about itself is a report, not a fact (issue 29, item 15): a
push agent's `changed_by` / `change_id` is marked reported (not verified) on the API, the
findings page and the audit trail; it may not name a person (refused, nothing stored); and
its change id is keyed under its own name, so it cannot join another agent's change."""

import pytest

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.models import Finding, ObservedState
from tests.conftest import approved_agent, token_client

pytestmark = pytest.mark.django_db


def observed(agent) -> dict:
    return {k: v for k, v in agent.active_version.spec.items() if k != "enforcement"}


@pytest.fixture
def pushers(people):
    """Two push agents of alice's, logging drift; each with its own token."""
    made = {}
    for name in ("refund-agent", "other-agent"):
        agent = approved_agent(people, name, connector={"type": "push"},
                               enforcement={"default": "log"})
        made[name] = (agent, token_client(people, agent))
    return made


@pytest.mark.parametrize("person", ["dana", "DANA", " bob ", "carol@example.com"])
def test_an_agent_cannot_name_a_person_as_the_author_of_its_drift(people, pushers, person):
    people.carol.email = "Carol@Example.com"
    people.carol.save(update_fields=["email"])
    agent, client = pushers["refund-agent"]
    before = ObservedState.objects.filter(agent=agent).count()
    response = client.put("/api/v1/agents/refund-agent/observed-state",
                          {**observed(agent), "model": "gpt-5", "change_id": "rollout-1",
                           "changed_by": person}, format="json")
    assert response.status_code == 422, response.json()
    error = response.json()["error"]
    assert error["code"] == "names_a_person"
    assert [d["pointer"] for d in error["details"]] == ["/changed_by"]
    assert ObservedState.objects.filter(agent=agent).count() == before


def test_what_an_agent_reports_is_shown_as_reported_everywhere(people, pushers, api_as,
                                                                client):
    agent, token = pushers["refund-agent"]
    assert token.put("/api/v1/agents/refund-agent/observed-state",
                     {**observed(agent), "model": "gpt-5", "change_id": "rollout-88",
                      "changed_by": "ci-pipeline"}, format="json").status_code == 202
    actions.reconcile_agent(agent.pk, trigger="observation")
    (listed,) = api_as(people.dana).get("/api/v1/findings",
                                        {"agent": "refund-agent"}).json()["results"]
    cause = listed["cause"]
    assert cause["verified"] is False and cause["reported_by"] == "agent:refund-agent"
    assert cause["actor"] == "ci-pipeline"
    opened = AuditEntry.objects.get(action="finding.opened", agent="refund-agent")
    assert opened.after["cause"]["verified"] is False
    assert opened.after["cause"]["reported_by"] == "agent:refund-agent"
    client.force_login(people.dana)
    page = client.get("/findings/").content.decode()
    assert "reported by agent:refund-agent, not verified" in page
    assert "by ci-pipeline" not in page  # never shown as if it were a fact


def test_an_agent_cannot_join_its_drift_to_another_agents_change(people, pushers, api_as):
    victim, _ = pushers["other-agent"]
    # the platform (an admin's token) names change CHG-1 for the other agent
    assert api_as(people.admin).put(
        "/api/v1/agents/other-agent/observed-state",
        {**observed(victim), "model": "gpt-5", "change_id": "CHG-1",
         "changed_by": "deploy-bot"}, format="json").status_code == 202
    actions.reconcile_agent(victim.pk, trigger="observation")
    agent, token = pushers["refund-agent"]
    assert token.put("/api/v1/agents/refund-agent/observed-state",
                     {**observed(agent), "model": "gpt-5", "change_id": "CHG-1"},
                     format="json").status_code == 202
    actions.reconcile_agent(agent.pk, trigger="observation")
    dana = api_as(people.dana)
    shared = dana.get("/api/v1/findings", {"cause": "change:CHG-1"}).json()["results"]
    assert {f["agent"] for f in shared} == {"other-agent"}
    own = Finding.objects.get(agent=agent)
    assert own.cause_key == "agent:refund-agent:change:CHG-1"
    (group,) = [g for g in dana.get("/api/v1/findings/causes").json()["results"]
                if g["key"] == "change:CHG-1"]
    assert group["agents"] == 1
