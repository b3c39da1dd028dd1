"""Approvals racing each other, on separate database connections, leave exactly one
consistent active version; the loser gets a clean conflict."""

import threading

import pytest
from django.db import connection

from config.errors import Conflict
from registry import actions
from registry.choices import VersionSource
from registry.models import Agent, DesiredStateVersion
from tests.conftest import refund_manifest


def race(*calls):
    """Run each call on its own thread and connection, released at the same instant."""
    barrier = threading.Barrier(len(calls))
    outcomes: list = [None] * len(calls)

    def run(index, call):
        try:
            barrier.wait()
            outcomes[index] = ("ok", call())
        except Exception as error:  # the outcome under test is which one fails, and how
            outcomes[index] = ("error", error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


@pytest.mark.parametrize("round_", range(3))
def test_two_approvers_approving_rival_proposals_at_once(transactional_db, people,
                                                         refund_agent, round_):
    metadata = refund_agent.active_version.metadata
    first = actions.propose(refund_agent, refund_manifest(model="a").spec, metadata,
                            actor=people.alice, source=VersionSource.API).version
    second = actions.propose(refund_agent, refund_manifest(model="b").spec, metadata,
                             actor=people.admin, source=VersionSource.API).version
    outcomes = race(lambda: actions.approve_proposal(first.pk, actor=people.bob),
                    lambda: actions.approve_proposal(second.pk, actor=people.carol))
    agent = Agent.objects.get(pk=refund_agent.pk)
    assert agent.generation == 2
    approved = DesiredStateVersion.objects.filter(agent=agent, state="approved",
                                                  generation=2).get()
    assert agent.active_version_id == approved.pk
    errors = [o[1] for o in outcomes if o[0] == "error"]
    winner_is_second = approved.pk == second.pk
    if winner_is_second:
        # The older rival was superseded, or its approver lost the lock race and got 409.
        assert DesiredStateVersion.objects.get(pk=first.pk).state == "superseded"
        assert all(isinstance(e, Conflict) for e in errors)
    else:
        assert len(errors) == 1 and isinstance(errors[0], Conflict)
        assert errors[0].code in ("stale_generation", "not_pending")
        assert DesiredStateVersion.objects.get(pk=second.pk).state == "pending"


def test_two_approvers_on_one_proposal_needing_two_both_count(transactional_db, people,
                                                              refund_agent):
    actions.create_guardrail(actor=people.dana, name="two", expression='spec.model == "gpt-4.1"',
                             effect="require_approvals", required_approvals=2, message="two")
    version = actions.propose(refund_agent, refund_manifest(model="gpt-5").spec,
                              refund_agent.active_version.metadata, actor=people.alice,
                              source=VersionSource.API).version
    outcomes = race(lambda: actions.approve_proposal(version.pk, actor=people.bob),
                    lambda: actions.approve_proposal(version.pk, actor=people.carol))
    assert [o[0] for o in outcomes] == ["ok", "ok"]
    version.refresh_from_db()
    assert (version.state, version.generation) == ("approved", 2)
    assert Agent.objects.get(pk=refund_agent.pk).generation == 2


@pytest.mark.skipif(connection.vendor != "postgresql",
                    reason="row locks held by another session are PostgreSQL's")
def test_an_approval_does_not_wait_for_a_pass_holding_the_agents_status(transactional_db,
                                                                        people, refund_agent):
    """A pass locks the status row, then may want the agent's row, which an approval holds
    while it writes the Recertified condition: the approval must not wait for the status row
    (the two once deadlocked), and the pass it requests writes the condition."""
    import psycopg
    from django.db import connection as django_connection

    from reconciliation.models import AgentStatus

    AgentStatus.objects.get_or_create(agent=refund_agent)
    version = actions.propose(refund_agent, refund_manifest(model="b").spec,
                              refund_agent.active_version.metadata, actor=people.alice,
                              source=VersionSource.API).version
    params = django_connection.get_connection_params()
    with psycopg.connect(dbname=params["dbname"], user=params.get("user"),
                         host=params.get("host"), port=params.get("port"),
                         password=params.get("password")) as pass_connection:
        pass_connection.execute("SELECT 1 FROM reconciliation_agentstatus WHERE agent_id = %s "
                                "FOR UPDATE", [refund_agent.pk])  # the pass's lock, held
        outcome = race(lambda: actions.approve_proposal(version.pk, actor=people.bob))
        assert outcome[0] is not None, "the approval waited for the pass's status row"
        assert outcome[0][0] == "ok", outcome[0]
        pass_connection.rollback()
    assert Agent.objects.get(pk=refund_agent.pk).active_version_id == version.pk
