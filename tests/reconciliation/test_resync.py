"""The periodic resync: batched checks with a constant number of queries, full passes only for
agents that need one, and never more than one queued pass per agent."""

import django_rq
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from reconciliation import actions, jobs
from reconciliation.models import AgentStatus
from registry.models import Agent
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
    assert few == many <= 3


def test_only_drifted_or_unconverged_agents_get_a_full_pass(people):
    agents = converged_agents(people, 4)
    actions.sandbox_deploy(agents[1], actor="system:test", changes={"tools": ["x"]},
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
    actions.sandbox_deploy(agents[0], actor="system:test", changes={"tools": ["x"]},
                           reason="drift")
    redis_client.flushdb()
    assert jobs.resync_batch([a.pk for a in agents]) == {"checked": 5, "queued": 1}
    assert jobs.resync_batch([a.pk for a in agents]) == {"checked": 5, "queued": 0}
