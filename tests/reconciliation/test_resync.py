"""The periodic resync: batched checks with a constant number of queries, full passes only for
agents that need one, and never more than one queued pass per agent."""

from datetime import timedelta

import django_rq
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reconciliation import actions, jobs
from reconciliation.models import AgentStatus
from registry.models import Agent
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import approved_agent

pytestmark = pytest.mark.django_db


def converged_agents(people, count: int) -> list[Agent]:
    made = [approved_agent(people, f"agent-{index:03d}", enforcement={"default": "correct"})
            for index in range(count)]
    for agent in made:
        actions.reconcile_agent(agent.pk, trigger="approved")
    return made


def queries_for(agent_ids: list[int]) -> tuple[int, list[int]]:
    with CaptureQueriesContext(connection) as captured:
        needs = actions.converged_check(agent_ids)
    return len(captured.captured_queries), needs


def test_a_batch_check_costs_the_same_queries_for_3_or_30_agents(people):
    agents = converged_agents(people, 30)
    few, needs_few = queries_for([a.pk for a in agents[:3]])
    many, needs_many = queries_for([a.pk for a in agents])
    assert needs_few == needs_many == []
    assert few == many == 1  # one set-based query, whatever the batch size


def test_only_drifted_or_unconverged_agents_get_a_full_pass(people):
    agents = converged_agents(people, 4)
    sandbox_actions.sandbox_deploy(agents[1], actor="system:test", changes={"tools": ["x"]},
                           reason="drift")
    AgentStatus.objects.filter(agent=agents[2]).update(converged=False)
    _, needs = queries_for([a.pk for a in agents])
    assert needs == [agents[1].pk, agents[2].pk]


def test_resync_queues_batches_and_never_floods_the_queue(people, redis_client, monkeypatch):
    agents = converged_agents(people, 5)
    monkeypatch.setattr(jobs, "RESYNC_BATCH", 2)
    assert jobs.resync() == 3
    queue = django_rq.get_queue("reconcile")
    assert queue.count == 3
    sandbox_actions.sandbox_deploy(agents[0], actor="system:test", changes={"tools": ["x"]},
                           reason="drift")
    redis_client.flushdb()
    assert jobs.resync_batch([a.pk for a in agents]) == {"checked": 5, "queued": 1}
    assert jobs.resync_batch([a.pk for a in agents]) == {"checked": 5, "queued": 0}


def test_a_converged_fleet_is_checked_without_writing_a_status_row(people):
    agents = converged_agents(people, 3)
    before = list(AgentStatus.objects.order_by("pk").values_list("pk", "last_reconciled_at"))
    with CaptureQueriesContext(connection) as captured:
        assert actions.converged_check([a.pk for a in agents]) == []
    assert not [q for q in captured.captured_queries if not q["sql"].startswith("SELECT")]
    after = list(AgentStatus.objects.order_by("pk").values_list("pk", "last_reconciled_at"))
    assert after == before


def test_a_push_agent_is_checked_again_only_when_it_reports_a_different_state(people):
    agent = approved_agent(people, "pusher", enforcement={"default": "correct"},
                           connector={"type": "push"})
    state = actions.desired_now(agent, timezone.now())
    state.pop("enforcement")
    actions.record_observation(agent, state, actor="system:test", source="push",
                               trigger_reconcile=False)
    actions.reconcile_agent(agent.pk, trigger="approved")
    assert actions.converged_check([agent.pk]) == []
    actions.record_observation(agent, state, actor="system:test", source="push",
                               trigger_reconcile=False)  # a heartbeat: the same state
    assert actions.converged_check([agent.pk]) == []
    actions.record_observation(agent, {**state, "tools": [*state["tools"], "shell.exec"]},
                               actor="system:test", source="push", trigger_reconcile=False)
    assert actions.converged_check([agent.pk]) == [agent.pk]


def test_a_platform_change_made_behind_our_back_is_found(people):
    agent, = converged_agents(people, 1)
    row = SandboxAgent.objects.get(agent=agent)
    row.state = {**row.state, "model": "gpt-4o"}
    row.save()
    assert actions.converged_check([agent.pk]) == [agent.pk]


def test_an_agent_is_checked_again_once_a_grant_expires_or_it_is_suspended(people):
    expires = timezone.now() + timedelta(hours=1)
    agent = approved_agent(people, "granted", enforcement={"default": "correct"}, grants=[
        {"resource": "crm", "access": "read", "reason": "audit",
         "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}])
    actions.reconcile_agent(agent.pk, trigger="approved")
    assert actions.converged_check([agent.pk]) == []
    assert actions.converged_check([agent.pk], now=expires + timedelta(seconds=1)) == [agent.pk]
    actions.suspend_agent(agent, actor="system:test", reason="test")
    assert actions.converged_check([agent.pk]) == [agent.pk]


def test_resync_ranges_queue_passes_only_for_agents_out_of_sync(people, redis_client):
    agents = converged_agents(people, 4)
    sandbox_actions.sandbox_deploy(agents[2], actor="system:test", changes={"tools": ["x"]},
                           reason="drift")
    redis_client.flushdb()
    assert jobs.resync_range(agents[0].pk, agents[-1].pk) == {"needs_pass": 1, "queued": 1}
    assert jobs.resync_range(agents[0].pk, agents[1].pk) == {"needs_pass": 0, "queued": 0}
