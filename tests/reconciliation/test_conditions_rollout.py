"""Conditions as Kubernetes keeps them, held mid-rollout: once generation 2 is approved and
before its pass has run, Ready does not say "matches generation 1" (it is False, reason
Progressing, naming both generations), and every condition carries the one generation the
controller observed; the pass for generation 2 then writes them all at generation 2."""

from reconciliation import actions as reconciliation_actions
from registry import actions
from tests.conftest import approved_agent, refund_manifest


def conditions(client) -> dict[str, dict]:
    body = client.get("/api/v1/agents/refund-agent").json()
    return {c["type"]: c for c in body["conditions"]}


def test_mid_rollout_ready_speaks_of_the_newest_approved_generation(people, api_as, client):
    agent = approved_agent(people, "refund-agent")
    assert reconciliation_actions.reconcile_agent(agent.pk, trigger="approved").result == \
        "converged"
    alice = api_as(people.alice)
    before = conditions(alice)
    assert before["Ready"]["status"] == "True"
    assert before["Ready"]["message"] == "matches generation 1"

    proposed = actions.propose(agent, refund_manifest(model="gpt-4.1-mini").spec,
                               agent.active_version.metadata, actor=people.alice, source="api")
    actions.approve_proposal(proposed.version.pk, actor=people.bob)  # its pass has not run
    held = conditions(alice)
    assert held["Ready"]["status"] == "False" and held["Ready"]["reason"] == "Progressing"
    assert "generation 2 is approved" in held["Ready"]["message"]
    assert {c["observedGeneration"] for c in held.values()} == {1}  # one status, one generation
    client.force_login(people.dana)
    page = client.get("/agents/refund-agent/")
    assert "generation 2 is approved and not reconciled yet" in page.content.decode()

    reconciliation_actions.reconcile_agent(agent.pk, trigger="approved")
    after = conditions(alice)
    assert after["Ready"]["status"] == "True"
    assert after["Ready"]["message"] == "matches generation 2"
    assert {c["observedGeneration"] for c in after.values()} == {2}
