"""The fleet view for compliance: every guardrail and toxic combination with the agents it
covers, current violations and trend, the agents no rule covers, silence; the same number of
queries whatever the size of the fleet."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reconciliation.actions import record_observation
from reconciliation.fleet import ROW_SOURCES, fleet_view
from reconciliation.silence import find_silent_agents
from reconciliation.toxic_paths import record_observed_paths
from registry import actions
from registry.choices import VersionSource
from tests.conftest import approved_agent, refund_manifest

pytestmark = pytest.mark.django_db


def make_rules(people):
    """Declared after the fleet was approved: what breaks them now is a current violation."""
    actions.create_guardrail(
        actor=people.dana, name="prod-refund-cap", selector={"env": "prod"},
        expression='!("payments.refund" in spec.actions) || '
                   'spec.actions["payments.refund"].max <= 1000',
        effect="deny", message="prod refunds stop at $1,000")
    actions.create_toxic_combination(actor=people.dana, name="customers-never-email",
                                     left="data:customers_db:read",
                                     right="tool:email.send_external")


def dev_agent(people, name, **spec):
    """An approved agent labelled env=dev (the refund agent's manifest is env=prod)."""
    manifest = refund_manifest(**spec)
    object.__setattr__(manifest, "name", name)
    object.__setattr__(manifest, "labels", {"team": "payments", "env": "dev"})
    (outcome,) = actions.apply_manifests([manifest], actor=people.alice,
                                         source=VersionSource.YAML)
    actions.approve_proposal(outcome.version.pk, actor=people.bob)


def fleet_of(people, count, offset=0):
    for i in range(count):
        dev_agent(people, f"agent-{offset + i}")


def test_each_rule_shows_coverage_violations_and_trend_and_the_uncovered_agents(people):
    approved_agent(people, "refund-agent")  # env=prod, refunds up to $5,000
    support = approved_agent(people, "support", connector={"type": "push"},
                   data=[{"resource": "customers_db", "access": "read"}],
                   delegates_to=["mailer"])
    approved_agent(people, "mailer", tools=["email.send_external"])
    dev_agent(people, "lonely")
    make_rules(people)
    record_observation(support, {"data": [{"resource": "customers_db", "access": "read"}],
                        "delegates_to": ["mailer"]},
                       actor="agent:support", source="push", trigger_reconcile=False)
    record_observed_paths()
    view = fleet_view()
    rows = {row["name"]: row for row in view["rules"]}
    cap = rows["prod-refund-cap"]
    assert (cap["kind"], cap["covers"], cap["violations"]) == (
        "guardrail", ["mailer", "refund-agent", "support"], ["mailer", "refund-agent",
                                                              "support"])
    toxic = rows["customers-never-email"]
    assert toxic["kind"] == "toxic_combination"
    assert toxic["covers"] == ["mailer", "support"]
    assert toxic["violations"] == ["mailer", "support"]
    assert len(toxic["trend"]) == 7
    assert view["uncovered"] == ["lonely"]
    assert view["charts"]["trend"]["data"] and view["charts"]["silence"]["data"]


def test_the_query_count_does_not_grow_with_the_fleet(people):
    make_rules(people)
    fleet_of(people, 3)
    fleet_view()  # warm caches (content types, sessions) out of the count
    with CaptureQueriesContext(connection) as small:
        fleet_view()
    fleet_of(people, 12, offset=3)
    with CaptureQueriesContext(connection) as large:
        view = fleet_view()
    assert view["agents"] == 15
    assert len(large.captured_queries) == len(small.captured_queries)


def test_silent_agents_are_listed_and_charted(people, settings):
    agent = approved_agent(people, "reporter", connector={"type": "push"})
    record_observation(agent, {"tools": []}, actor="agent:reporter", source="push",
                       trigger_reconcile=False)
    later = timezone.now() + timezone.timedelta(seconds=settings.HEARTBEAT_PUSH_SECONDS + 5)
    find_silent_agents(later)
    view = fleet_view(later)
    assert [s["agent"] for s in view["silent"]] == ["reporter"]
    assert view["charts"]["silence"]["data"][0]["y"][-1] == 1


def test_page_and_api_are_for_compliance_approvers_and_admins(people, client, api_as):
    approved_agent(people, "refund-agent")
    make_rules(people)
    for person in (people.dana, people.bob, people.admin):
        assert api_as(person).get("/api/v1/fleet").status_code == 200
    assert api_as(people.alice).get("/api/v1/fleet").status_code == 403
    client.force_login(people.alice)
    assert client.get("/fleet/").status_code == 403
    client.force_login(people.dana)
    page = client.get("/fleet/").content.decode()
    assert 'data-rule="prod-refund-cap"' in page and 'data-rule="customers-never-email"' in page
    assert "chart-fleet-silence" in page and "/vendor/plotly-basic-4.1.1.min.js" in page


def test_a_rule_kind_is_one_row_source():
    assert [source.__name__ for source in ROW_SOURCES] == [
        "guardrail_rows", "toxic_rows", "group_rule_rows", "budget_rows"]


def test_with_no_rule_yet_the_trend_still_shows_the_days_and_says_why_it_is_empty(people):
    approved_agent(people, "refund-agent")
    trend = fleet_view()["charts"]["trend"]
    days = trend["layout"]["xaxis"]["categoryarray"]
    assert len(days) == len(set(days)) == 7 and days[-1] == timezone.now().strftime("%m-%d")
    assert trend["data"] == []
    assert trend["layout"]["yaxis"]["dtick"] == 1  # whole numbers, never 0.2 steps
    assert "No rule yet" in \
        trend["layout"]["annotations"][0]["text"]
    make_rules(people)
    trend = fleet_view()["charts"]["trend"]
    assert trend["layout"]["annotations"] == [] and len(trend["data"]) == 2
    assert all(trace["x"] == days for trace in trend["data"])
