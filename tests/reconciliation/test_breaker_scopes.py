"""The blast-radius breaker counts per owner and per team as well as for the cluster (issue 12
item 5): one owner drifting their own agents trips their own breaker and pauses correction of
their agents only; alice's drift is still corrected; a fleet-wide wave still trips the
cluster's breaker. The tripped scopes are on the API, the overview and /metrics, and compliance
resets each one."""

import pytest

from reconciliation import actions
from reconciliation.models import ReconcileRun
from registry import actions as registry_actions
from registry.choices import Role
from registry.models import Agent
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, make_person, refund_manifest

pytestmark = pytest.mark.django_db


def agent_of(owner, name: str, approver) -> Agent:
    manifest = refund_manifest(enforcement={"default": "correct"})
    object.__setattr__(manifest, "name", name)
    object.__setattr__(manifest, "owner", owner.username)
    (outcome,) = registry_actions.apply_manifests([manifest], actor=owner, source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=approver)
    agent = Agent.objects.get(name=name)
    assert actions.reconcile_agent(agent.pk, trigger="approved").result == "converged"
    return agent


def drift(agent: Agent) -> ReconcileRun:
    """A bad deployment on the agent's platform, then the pass a worker would run."""
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    return actions.reconcile_agent(agent.pk, trigger="observation")


def scopes(client) -> tuple[bool, list[str]]:
    body = client.get("/api/v1/control").json()
    return body["breaker_tripped_at"] is not None, [b["scope"] for b in body["breakers"]]


@pytest.fixture
def cluster(people, settings):
    """Seven agents in team payments: three of oscar's, four of alice's."""
    settings.BREAKER_MIN_AGENTS = 2
    settings.BREAKER_SHARE_PERCENT = 40
    settings.BREAKER_SCOPE_MIN_DRIFTING = 2
    oscar = make_person("oscar", Role.OWNER)
    return {
        "oscar": [agent_of(oscar, f"oscar-{i}", people.bob) for i in range(3)],
        "alice": [agent_of(people.alice, f"alice-{i}", people.bob) for i in range(4)],
    }


def test_one_owner_drifting_their_agents_pauses_only_theirs(people, cluster, api_as, client):
    dana = api_as(people.dana)
    mine = cluster["oscar"]
    assert drift(mine[0]).result == "corrected"
    assert drift(mine[1]).result == "corrected"  # 2 of oscar's 3: his breaker trips
    assert scopes(dana) == (False, ["owner:oscar"])
    assert drift(mine[2]).changes == []  # his third agent waits for a human
    # 3 of 7 agents drifted (43% > 40%), but all of them oscar's: alice's drift is corrected
    assert drift(cluster["alice"][0]).result == "corrected"
    assert scopes(dana) == (False, ["owner:oscar"])
    metrics = client.get("/metrics").content.decode()
    assert 'breaker_scope_tripped{scope="owner:oscar"} 1.0' in metrics
    assert "breaker_tripped 0.0" in metrics
    client.force_login(people.alice)
    assert "Breaker tripped for <strong>owner:oscar</strong>" in client.get("/").content.decode()
    # compliance resets his breaker; his agent is corrected on its next pass
    reset = dana.post("/api/v1/control/breaker/reset",
                      {"scope": "owner:oscar", "reason": "oscar's bad deploy understood"},
                      format="json")
    assert reset.status_code == 200 and reset.json()["breakers"] == []
    assert actions.reconcile_agent(mine[2].pk, trigger="manual").result == "corrected"


def test_a_fleet_wide_wave_still_trips_the_cluster_breaker(people, cluster, api_as):
    dana = api_as(people.dana)
    for agent in cluster["oscar"]:
        drift(agent)
    drift(cluster["alice"][0])
    assert drift(cluster["alice"][1]).result == "corrected"  # the wave reaches a second owner
    tripped, scoped = scopes(dana)
    assert tripped and {"owner:oscar", "owner:alice", "team:payments"} <= set(scoped)
    assert drift(cluster["alice"][2]).changes == []
    assert dana.post("/api/v1/control/breaker/reset", {"reason": "wave understood"},
                     format="json").status_code == 200
    assert scopes(dana)[0] is False
