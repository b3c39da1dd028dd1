"""The compliance timeline as a plotly chart with a time axis (24 h and 7 d visibly
different, hover with each interval's reason), and the fleet's chart of every agent."""

import json
import re
from datetime import datetime, timedelta

import pytest

from reconciliation import actions
from reconciliation.fleet import fleet_view
from registry.models import Agent
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, approved_agent, shadow_on

pytestmark = pytest.mark.django_db

CHART = re.compile(r'<script id="timeline-chart-data" type="application/json">(.*?)</script>',
                   re.S)


def drifted_agent(people, name: str):
    agent = approved_agent(people, name, enforcement={"default": "correct"})
    actions.reconcile_agent(agent.pk, trigger="approved")
    shadow_on(people, agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")
    return agent


def chart_on_page(client, query: str = "") -> dict:
    page = client.get(f"/agents/chart-agent/{query}").content.decode()
    return json.loads(CHART.search(page).group(1))


def hours_shown(chart: dict) -> float:
    start, end = (datetime.fromisoformat(t) for t in chart["layout"]["xaxis"]["range"])
    return (end - start) / timedelta(hours=1)


def test_the_time_axis_spans_what_was_asked(people, client):
    agent = drifted_agent(people, "chart-agent")
    Agent.objects.filter(pk=agent.pk).update(created_at=agent.created_at - timedelta(days=30))
    client.force_login(people.dana)
    day, week = chart_on_page(client), chart_on_page(client, "?timeline=7d")
    assert day["layout"]["xaxis"]["type"] == "date"
    assert hours_shown(day) == 24 and hours_shown(week) == 24 * 7


def test_a_young_agents_chart_is_its_life_not_a_week_of_not_known(people, client):
    agent = drifted_agent(people, "chart-agent")
    Agent.objects.filter(pk=agent.pk).update(created_at=agent.created_at - timedelta(hours=2))
    client.force_login(people.dana)
    week = chart_on_page(client, "?timeline=7d")
    assert 2 <= hours_shown(week) < 2.2
    assert "since it was registered" in week["layout"]["title"]["text"]


def test_each_interval_hovers_with_its_reason(people, client):
    drifted_agent(people, "chart-agent")
    client.force_login(people.dana)
    traces = {trace["name"]: trace for trace in chart_on_page(client)["data"]}
    out = traces["out of policy"]
    assert out["y"] == ["chart-agent"] and "drifted" in out["hovertext"][0]
    assert traces["in policy"]["hovertext"][0].startswith("chart-agent: in policy")
    assert all(width > 0 for trace in traces.values() for width in trace["x"])


def test_the_fleet_chart_draws_every_agent_on_one_chart(people):
    drifted_agent(people, "fleet-a")
    approved_agent(people, "fleet-b")  # never reconciled: not known
    chart = fleet_view()["charts"]["compliance"]
    rows = {name for trace in chart["data"] for name in trace["y"]}
    assert rows == {"fleet-a", "fleet-b"}
    unknown = next(trace for trace in chart["data"] if trace["name"] == "not known")
    assert "fleet-b" in unknown["y"] and hours_shown(chart) == 24 * 7


def test_the_fleet_chart_costs_the_same_queries_for_more_agents(
        people, django_assert_max_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    drifted_agent(people, "fleet-a")
    with CaptureQueriesContext(connection) as few:
        fleet_view()
    for index in range(3):
        drifted_agent(people, f"fleet-more-{index}")
    with django_assert_max_num_queries(len(few.captured_queries)):
        fleet_view()
