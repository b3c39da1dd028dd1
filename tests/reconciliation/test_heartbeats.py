"""Heartbeats: an agent reporting the state its last pass found in sync runs no pass; what comes
due by the clock alone (a waiver's lapse) is still acted on while the heartbeats keep coming."""

import pytest

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.controller.work_queue import QUEUED_KEY
from reconciliation.models import AgentStatus, Finding
from tests.conftest import approved_with_client, eventually

PUSH = {"enforcement": {"default": "correct"}, "connector": {"type": "push"}}


def report_of(agent, *extra_tools: str) -> dict:
    spec = agent.active_version.spec
    return {**{k: v for k, v in spec.items() if k != "enforcement"}, "running": True,
            "tools": [*spec["tools"], *extra_tools]}


@pytest.mark.django_db
def test_a_heartbeat_of_a_converged_agent_queues_no_pass(people, redis_client,
                                                         django_capture_on_commit_callbacks):
    agent, client = approved_with_client(people, **PUSH)
    path = f"/api/v1/agents/{agent.name}/observed-state"
    queued = QUEUED_KEY.format(agent_id=agent.pk)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.put(path, report_of(agent), format="json").status_code == 202
    assert redis_client.exists(queued)  # a new state: a pass
    redis_client.delete(queued)
    assert actions.reconcile_agent(agent.pk, trigger="observation").result == "converged"

    with django_capture_on_commit_callbacks(execute=True):
        assert client.put(path, report_of(agent), format="json").status_code == 202
    assert not redis_client.exists(queued)  # the same state, found in sync: no pass

    with django_capture_on_commit_callbacks(execute=True):  # a changed state: a pass again
        client.put(path, report_of(agent, "crm.search"), format="json")
    assert redis_client.exists(queued)


def test_a_waiver_lapsing_on_a_converged_agent_sending_heartbeats_is_acted_on(
        people, api_as, start_worker):
    agent, client = approved_with_client(people, **PUSH)
    path = f"/api/v1/agents/{agent.name}/observed-state"
    worker = start_worker("reconcile", "default")
    granted = api_as(people.bob).post(
        f"/api/v1/agents/{agent.name}/waivers",
        {"pointer": "/tools/crm.search", "reason": "CRM lookups during the migration",
         "ticket": "CHG-1234", "duration": "15s"}, format="json")
    assert granted.status_code == 201, granted.json()
    drifted = report_of(agent, "crm.search")
    assert client.put(path, drifted, format="json").status_code == 202
    finding = eventually(lambda: Finding.objects.filter(
        agent=agent, pointer="/tools/crm.search", status="logged").first(),
        timeout=60, message=worker.output)
    eventually(lambda: AgentStatus.objects.get(agent=agent).converged,  # waived: allowed
               timeout=60, message=worker.output)

    def acted_on() -> bool:
        client.put(path, drifted, format="json")  # the agent keeps reporting the same state
        finding.refresh_from_db()
        return finding.status == "correcting"

    eventually(acted_on, timeout=90, interval=1, message=worker.output)
    assert AuditEntry.objects.filter(action="waiver.lapsed", agent=agent.name).exists()
