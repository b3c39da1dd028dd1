"""Actions beside a pass of the same agent that is settling. The settling pass holds the agent's
status row and then wants a key share of the agent's row (its run row refers to it); an action
that locked the agent's row and then wanted its status row deadlocked with it, and PostgreSQL
broke the deadlock by failing one of them: an approver accepting drift saw a 500 (CI, beside a
pydantic-ai agent's pass), and retiring an agent could too. The agent's row is now locked FOR
NO KEY UPDATE everywhere (no product code changes a key), which leaves a key share free, and
the accept leaves a held status row to the pass it requests."""

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections

from reconciliation import actions
from reconciliation.models import AgentStatus, Escalation
from registry import actions as registry_actions
from registry.models import Agent
from tests.conftest import approved_agent, eventually, postgresql_only, waits_on_a_lock

pytestmark = [postgresql_only, pytest.mark.django_db(transaction=True)]


def escalated_tool(people):
    agent = approved_agent(people, "held-agent", connector={"type": "push"},
                           enforcement={"default": "escalate"})
    runs = {k: v for k, v in agent.active_version.spec.items() if k != "enforcement"}
    actions.record_observation(agent, {**runs, "running": True,
                                       "tools": [*runs["tools"], "crm.export"]},
                               actor=agent, source="push", trigger_reconcile=False)
    actions.reconcile_agent(agent.pk, trigger="observation")
    return agent, Escalation.objects.get(agent=agent, status="open")


def beside_a_settling_pass(agent: Agent, action: Callable[[], Any]) -> Any:
    """Run `action` in a thread of its own while another session does what a settling pass
    does, in its order: the agent's status row locked, then a key share of the agent's row
    (after the action has finished or started waiting). The action's answer, or what it
    raised."""
    settling = connections.create_connection("default")
    settling.set_autocommit(False)
    answers = []
    try:
        with settling.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pass_pid = cursor.fetchone()[0]
            cursor.execute("SELECT 1 FROM reconciliation_agentstatus WHERE agent_id = %s "
                           "FOR UPDATE", [agent.pk])  # the pass's settle stage

        def act() -> None:
            try:
                answers.append(action())
            except Exception as error:  # the request raised (a 500): kept to be shown
                answers.append(error)
            finally:
                connections.close_all()  # this thread's own connection

        actor = threading.Thread(target=act)
        actor.start()
        # the action has finished, or it waits (holding the agent's row) for the status row
        eventually(lambda: answers or waits_on_a_lock(besides=pass_pid), timeout=60)
        with settling.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '60s'")
            # the pass's run row refers to the agent: a key share of the agent's row
            cursor.execute("SELECT 1 FROM registry_agent WHERE id = %s FOR KEY SHARE",
                           [agent.pk])
        settling.commit()
        actor.join(timeout=60)
    finally:
        settling.close()
    assert len(answers) == 1, "the action never answered"
    (answer,) = answers
    assert not isinstance(answer, Exception), f"the action failed: {answer!r}"
    return answer


def test_accepting_drift_while_a_pass_settles_neither_waits_for_the_other(people, api_as):
    agent, escalation = escalated_tool(people)
    answer = beside_a_settling_pass(agent, lambda: api_as(people.carol).post(
        f"/api/v1/escalations/{escalation.pk}/resolve",
        {"resolution": "accept", "comment": "we need it"}, format="json"))
    assert answer.status_code == 200, answer.content
    escalation.refresh_from_db()
    assert escalation.status == "resolved"
    assert agent.versions.filter(state="pending").exists()


def test_retiring_an_agent_while_a_pass_settles_retires_it(people, api_as):
    agent, _escalation = escalated_tool(people)
    retirement = registry_actions.propose_retirement(agent.name, actor=people.alice,
                                                     reason="replaced by v2")
    answer = beside_a_settling_pass(agent, lambda: api_as(people.bob).post(
        f"/api/v1/retirements/{retirement.pk}/approve", {"comment": "v2 is live"},
        format="json"))
    assert answer.status_code == 200, answer.content
    assert Agent.objects.get(pk=agent.pk).lifecycle == "retired"
    # it waited for the pass, then marked the agent retired (never in policy again)
    assert AgentStatus.objects.get(agent=agent).health == "retired"
