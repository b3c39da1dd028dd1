"""push: corrections become the desired state the agent pulls; verification waits for its
next report."""

import pytest

from reconciliation import actions
from reconciliation.models import Correction, Finding
from registry import actions as registry_actions
from registry.models import Agent
from tests.conftest import refund_manifest, token_client

pytestmark = pytest.mark.django_db


def test_the_agent_pulls_the_correction_and_its_next_report_verifies_it(people):
    manifest = refund_manifest(enforcement={"default": "correct"}, connector={"type": "push"})
    (outcome,) = registry_actions.apply_manifests([manifest], actor=people.alice, source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    agent = Agent.objects.get(name="refund-agent")
    client = token_client(people, agent)

    assert actions.reconcile_agent(agent.pk, trigger="manual").result == "skipped"  # no report
    drifted = {k: v for k, v in manifest.spec.items() if k != "enforcement"}
    drifted.update(running=True, tools=[*drifted["tools"], "crm.search"])
    client.put("/api/v1/agents/refund-agent/observed-state", drifted, format="json")
    run = actions.reconcile_agent(agent.pk, trigger="observation")
    assert run.result == "correcting"
    assert [c["outcome"] for c in run.changes] == ["published"]
    assert Finding.objects.get().status == "correcting"

    # The sidecar pulls, applies, and reports back.
    desired = client.get("/api/v1/agents/refund-agent/desired-state").json()
    assert "crm.search" not in desired["spec"]["tools"]
    fixed = {**drifted, "tools": desired["spec"]["tools"]}
    client.put("/api/v1/agents/refund-agent/observed-state", fixed, format="json")
    assert actions.reconcile_agent(agent.pk, trigger="observation").result == "converged"
    assert Finding.objects.get().status == "corrected"
    assert Correction.objects.get().result == "verified"


def test_another_owner_reading_the_desired_state_is_not_shown_its_corrections(people, api_as):
    """Issue 12 item 6: corrections are what was done to an agent; the spec is for anyone."""
    from registry.choices import Role
    from tests.conftest import make_person

    manifest = refund_manifest(enforcement={"default": "correct"}, connector={"type": "push"})
    (outcome,) = registry_actions.apply_manifests([manifest], actor=people.alice, source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    agent = Agent.objects.get(name="refund-agent")
    drifted = {k: v for k, v in manifest.spec.items() if k != "enforcement"}
    drifted.update(running=True, tools=[*drifted["tools"], "crm.search"])
    token_client(people, agent).put("/api/v1/agents/refund-agent/observed-state", drifted,
                                    format="json")
    actions.reconcile_agent(agent.pk, trigger="observation")
    path = "/api/v1/agents/refund-agent/desired-state"
    assert len(api_as(people.alice).get(path).json()["corrections"]) == 1
    assert len(api_as(people.bob).get(path).json()["corrections"]) == 1
    stranger = api_as(make_person("oscar", Role.OWNER)).get(path).json()
    assert stranger["corrections"] == [] and stranger["spec"]["tools"] == manifest.spec["tools"]
