"""An approver accepting drift while a pass of the same agent settles: accepting proposes (it
holds the agent's row) and the settling pass holds the agent's status row and then wants the
agent's (its run row refers to it). The accept once waited for the status row as well, and
PostgreSQL broke the deadlock by failing one of them: the approver saw a 500 (CI, beside a
pydantic-ai agent's pass). Now the accept leaves a held status row to the pass."""

import threading

import pytest
from django.db import connection, connections

from reconciliation import actions
from reconciliation.models import Escalation
from tests.conftest import approved_agent, eventually, postgresql_only

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


def waiting_on_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                       " AND pid <> %s AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'",
                       [pid])
        return cursor.fetchone()[0] > 0


def test_accepting_drift_while_a_pass_settles_neither_waits_for_the_other(people, api_as):
    agent, escalation = escalated_tool(people)
    settling = connections.create_connection("default")
    settling.set_autocommit(False)
    answers = []
    try:
        with settling.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pass_pid = cursor.fetchone()[0]
            cursor.execute("SELECT 1 FROM reconciliation_agentstatus WHERE agent_id = %s "
                           "FOR UPDATE", [agent.pk])  # the pass's settle stage
        def accept() -> None:
            try:
                answers.append(api_as(people.carol).post(
                    f"/api/v1/escalations/{escalation.pk}/resolve",
                    {"resolution": "accept", "comment": "we need it"}, format="json"))
            except Exception as error:  # the request raised (a 500): kept to be shown
                answers.append(error)
            finally:
                connections.close_all()  # this thread's own connection

        approver = threading.Thread(target=accept)
        approver.start()
        # the accept has finished, or it waits (holding the agent's row) for the status row
        eventually(lambda: answers or waiting_on_a_lock(pass_pid), timeout=60)
        with settling.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '60s'")
            # the pass's run row refers to the agent: a key share of the agent's row
            cursor.execute("SELECT 1 FROM registry_agent WHERE id = %s FOR KEY SHARE",
                           [agent.pk])
        settling.commit()
        approver.join(timeout=60)
    finally:
        settling.close()
    assert len(answers) == 1, "the accept never answered"
    (answer,) = answers
    assert not isinstance(answer, Exception), f"the accept failed: {answer!r}"
    assert answer.status_code == 200, answer.content
    escalation.refresh_from_db()
    assert escalation.status == "resolved"
    assert agent.versions.filter(state="pending").exists()
