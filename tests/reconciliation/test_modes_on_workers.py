"""Each enforcement mode, shadow mode and a lagging platform on a real RQ worker, read back
through the API the way an operator or a dashboard sees them (conditions with
observedGeneration)."""

import pytest
from rest_framework.test import APIClient

from reconciliation.models import Correction, Escalation, Finding, ReconcileRun
from registry import actions as registry_actions
from registry.models import Agent
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import BAD_DEPLOYMENT, eventually, refund_manifest, shadow_on

QUICK = {"RECONCILE_VERIFY_DELAY_SECONDS": "1"}


def approved(people, enforcement: dict) -> Agent:
    (outcome,) = registry_actions.apply_manifests(
        [refund_manifest(enforcement=enforcement)], actor=people.alice, source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)  # queues a pass
    return Agent.objects.get(name="refund-agent")


def converged(agent: Agent) -> bool:
    return ReconcileRun.objects.filter(agent=agent, result="converged").exists()


def conditions(people) -> dict[str, dict]:
    client = APIClient()
    client.force_login(people.dana)
    response = client.get("/api/v1/agents/refund-agent")
    assert response.status_code == 200
    return {c["type"]: c for c in response.json()["conditions"]}


def sandbox(agent: Agent) -> SandboxAgent:
    return SandboxAgent.objects.get(agent=agent)


def statuses(agent: Agent) -> set[str]:
    return set(Finding.objects.filter(agent=agent).values_list("status", flat=True))


def test_escalate_mode_hands_the_limit_to_a_human_and_corrects_the_rest(people, start_worker):
    worker = start_worker(**QUICK)
    agent = approved(people, {"default": "correct", "actions": "escalate"})
    eventually(lambda: converged(agent), message=worker.output())
    sandbox_actions.sandbox_deploy(agent, actor="system:deploy-bot", changes=BAD_DEPLOYMENT,
                           reason="a deployment quietly widened access")
    eventually(lambda: statuses(agent) == {"corrected", "escalated"}, timeout=30,
               message=lambda: f"findings {statuses(agent)}; worker said:\n{worker.output()}")
    (escalation,) = Escalation.objects.filter(agent=agent, status="open")
    assert escalation.finding.kind == "action_limit_missing"
    assert sandbox(agent).state["actions"]["payments.refund"] == {"max": 5000}  # left alone
    assert "crm.search" not in sandbox(agent).state["tools"]
    now = conditions(people)
    assert (now["Escalated"]["status"], now["Escalated"]["reason"]) == ("True", "AwaitingHuman")
    assert (now["Ready"]["status"], now["Ready"]["reason"]) == ("False", "Drifted")
    assert {c["observedGeneration"] for c in now.values()} == {1}


def test_block_mode_suspends_the_agent_through_the_platform(people, start_worker):
    worker = start_worker(**QUICK)
    agent = approved(people, {"default": "block"})
    eventually(lambda: converged(agent), message=worker.output())
    sandbox_actions.sandbox_deploy(agent, actor="system:deploy-bot", changes=BAD_DEPLOYMENT,
                           reason="a deployment quietly widened access")
    # The platform stops the agent before the registry records it (the connector is told
    # first): wait for the end state, not the first sign of it.
    eventually(lambda: (sandbox(agent).state["running"] is False
                        and Agent.objects.get(pk=agent.pk).lifecycle == "suspended"
                        and statuses(agent) == {"blocked"}
                        and conditions(people)["Suspended"]["status"] == "True"),
               timeout=60,
               message=lambda: f"findings {statuses(agent)}; worker said:\n{worker.output()}")
    assert "crm.search" in sandbox(agent).state["tools"]  # suspended, not corrected


def test_shadow_mode_on_a_worker_records_the_corrections_and_applies_none(people,
                                                                         start_worker):
    worker = start_worker(**QUICK)
    agent = approved(people, {"default": "correct"})
    eventually(lambda: converged(agent), message=worker.output())
    shadow_on(people, agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:deploy-bot", changes=BAD_DEPLOYMENT,
                           reason="a deployment quietly widened access")
    eventually(lambda: ReconcileRun.objects.filter(agent=agent, shadow=True,
                                                   result="drifted").exists(),
               timeout=30, message=worker.output())
    assert Correction.objects.filter(agent=agent, result="shadow").count() == 3
    assert sandbox(agent).apply_count == 0 and "crm.search" in sandbox(agent).state["tools"]
    now = conditions(people)
    assert (now["Drifted"]["status"], now["Drifted"]["reason"]) == ("True", "DriftFound")
    assert now["Drifted"]["message"] == "3 open finding(s)"


@pytest.mark.parametrize("lag_seconds", [4])
def test_a_lagging_platform_is_waited_for_not_corrected_twice(people, start_worker,
                                                              lag_seconds):
    worker = start_worker(**QUICK)
    agent = approved(people, {"default": "correct"})
    eventually(lambda: converged(agent), message=worker.output())
    sandbox_actions.sandbox_faults(agent, actor="system:test", lag_seconds=lag_seconds)
    sandbox_actions.sandbox_deploy(agent, actor="system:deploy-bot", changes=BAD_DEPLOYMENT,
                           reason="a deployment quietly widened access")
    # The finding turns "correcting" one transaction before the conditions say so.
    eventually(lambda: (statuses(agent) == {"correcting"}
                        and conditions(people)["Reconciling"]["reason"] == "Verifying"),
               timeout=30, message=worker.output())
    # Verification commits the findings one transaction before settlement writes the
    # conditions: wait for both.
    eventually(lambda: (statuses(agent) == {"corrected"}
                        and conditions(people)["Ready"]["reason"] == "Converged"), timeout=30,
               message=lambda: f"findings {statuses(agent)}, conditions {conditions(people)}; "
                               f"worker said:\n{worker.output()}")
    assert sandbox(agent).apply_count == 3  # stale reads never made it apply again
    now = conditions(people)
    assert (now["Ready"]["status"], now["Ready"]["reason"]) == ("True", "Converged")
    assert now["Ready"]["message"] == "matches generation 1"
