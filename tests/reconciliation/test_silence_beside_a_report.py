"""The scheduled silence check beside a report of the same agent that has not committed yet.
The check read when each agent was last heard before it locked the open silences: when a report
ended a silence at that moment, the check waited for the report's lock on the silence, found it
closed, judged the agent by what it had read before the report, and started a second silence
just after the report (CI: two silences, none open, a second alert). It now waits for a report
under way, whether it ends a silence or not, and judges the agent by it. Row locks are
PostgreSQL's; SQLite runs one writing transaction at a time."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reconciliation.actions import record_observation
from reconciliation.models import AlertEvent, ObservedState, Silence
from reconciliation.silence import find_silent_agents
from tests.conftest import approved_agent, eventually, postgresql_only, waits_on_a_lock

pytestmark = [postgresql_only, pytest.mark.django_db(transaction=True)]


def check_during_a_report(agent, state) -> dict[str, int]:
    """Run the silence check while a report of `state` by `agent` is written but not
    committed; the report commits once the check waits on a lock or has finished. What the
    check answered."""
    written, commit, answers = threading.Event(), threading.Event(), []

    def report() -> None:
        try:
            with transaction.atomic():
                record_observation(agent, state, actor=f"agent:{agent.name}", source="push",
                                   trigger_reconcile=False)
                written.set()
                commit.wait(timeout=60)
        finally:
            connections.close_all()

    def check() -> None:
        try:
            answers.append(find_silent_agents())
        except Exception as error:  # shown by the assertion below
            answers.append(error)
        finally:
            connections.close_all()

    reporter = threading.Thread(target=report)
    reporter.start()
    assert written.wait(timeout=60), "the report was never written"
    checker = threading.Thread(target=check)
    checker.start()
    try:
        eventually(lambda: answers or waits_on_a_lock(), timeout=60)
    finally:
        commit.set()
        reporter.join(timeout=60)
        checker.join(timeout=60)
    assert len(answers) == 1 and isinstance(answers[0], dict), answers
    return answers[0]


def unheard_for_an_hour(agent) -> None:
    ObservedState.objects.filter(agent=agent).update(
        last_seen_at=timezone.now() - timedelta(hours=1))


@pytest.fixture
def reporter(people, settings):
    settings.HEARTBEAT_PUSH_SECONDS = 60
    agent = approved_agent(people, "reporter", connector={"type": "push"})
    record_observation(agent, {"tools": ["orders.lookup"]}, actor="agent:reporter",
                       source="push", trigger_reconcile=False)
    unheard_for_an_hour(agent)
    return agent


@pytest.mark.parametrize("state", [{"tools": ["orders.lookup"]}, {"tools": ["orders.refund"]}],
                         ids=["a heartbeat", "a changed state"])
def test_a_report_ending_a_silence_is_not_followed_by_a_second_one(reporter, state):
    assert find_silent_agents()["started"] == 1
    unheard_for_an_hour(reporter)  # the silence began an hour after the report too

    answer = check_during_a_report(reporter, state)

    assert answer["started"] == 0
    assert Silence.objects.filter(agent=reporter).count() == 1
    assert not Silence.objects.filter(agent=reporter, ended_at__isnull=True).exists()
    assert AlertEvent.objects.filter(event="agent.silent", agent_name="reporter").count() == 1
    assert AlertEvent.objects.filter(event="agent.heard_again",
                                     agent_name="reporter").count() == 1


@pytest.mark.parametrize("state", [{"tools": ["orders.lookup"]}, {"tools": ["orders.refund"]}],
                         ids=["a heartbeat", "a changed state"])
def test_a_report_under_way_keeps_a_silence_from_starting(reporter, state):
    answer = check_during_a_report(reporter, state)

    assert answer == {"started": 0, "ended": 0, "silent": 0}
    assert not Silence.objects.filter(agent=reporter).exists()
    assert not AlertEvent.objects.filter(event="agent.silent", agent_name="reporter").exists()
    # the next check finds it silent only once it is: an hour later
    assert find_silent_agents()["started"] == 0
    assert find_silent_agents(timezone.now() + timedelta(hours=1))["started"] == 1


def test_the_second_look_costs_the_same_queries_for_one_agent_or_many(people, settings):
    settings.HEARTBEAT_PUSH_SECONDS = 60
    for name in ("one", "two", "three", "four"):
        agent = approved_agent(people, name, connector={"type": "push"})
        record_observation(agent, {"tools": []}, actor=f"agent:{name}", source="push",
                           trigger_reconcile=False)
        unheard_for_an_hour(agent)
    with CaptureQueriesContext(connection) as queries:
        assert find_silent_agents()["started"] == 4
    locks = [q["sql"] for q in queries.captured_queries
             if "reconciliation_observedstate" in q["sql"] and "FOR NO KEY UPDATE" in q["sql"]]
    assert len(locks) == 1, locks
