"""The agents list shows each agent's health and sync and filters by them (page and API). The
two words are the loop's: reconciliation registers them with the registry's list filters, and
with nothing registered the list is an error, never one that ignores `?health=`."""

import re

import pytest
from django.core.exceptions import ImproperlyConfigured

from reconciliation import actions
from reconciliation.agent_filters import AgentStateFilterSet
from registry import filters
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, approved_agent, shadow_on

pytestmark = pytest.mark.django_db

ROW = re.compile(r'<tr data-agent="([\w-]+)" data-health="(\w+)" data-sync="(\w+)">')


@pytest.fixture
def fleet(people):
    steady = approved_agent(people, "steady-agent", enforcement={"default": "correct"})
    actions.reconcile_agent(steady.pk, trigger="approved")
    drifting = approved_agent(people, "drifting-agent", enforcement={"default": "correct"})
    actions.reconcile_agent(drifting.pk, trigger="approved")
    shadow_on(people, drifting)  # drift left in place
    sandbox_actions.sandbox_deploy(drifting, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="bad")
    actions.reconcile_agent(drifting.pk, trigger="observation")
    approved_agent(people, "new-agent")  # never reconciled
    return people


def rows(client, query: str = "") -> dict[str, tuple[str, str]]:
    page = client.get(f"/agents/{query}").content.decode()
    return {name: (health, sync) for name, health, sync in ROW.findall(page)}


def test_each_agent_shows_its_health_and_sync(fleet, client):
    client.force_login(fleet.dana)
    assert rows(client) == {"steady-agent": ("in_policy", "synced"),
                            "drifting-agent": ("drifted", "out_of_sync"),
                            "new-agent": ("unknown", "unknown")}
    page = client.get("/agents/").content.decode()
    assert "✔</span> in policy" in page and "▲</span> drifted" in page and "out of sync" in page


@pytest.mark.parametrize(("query", "names"), [
    ("?health=drifted", {"drifting-agent"}),
    ("?health=in_policy", {"steady-agent"}),
    ("?health=unknown", {"new-agent"}),
    ("?sync=synced", {"steady-agent"}),
    ("?sync=out_of_sync", {"drifting-agent"}),
    ("?sync=unknown", {"new-agent"}),
    ("?health=in_policy&sync=out_of_sync", set()),
])
def test_the_list_filters_by_health_and_sync(fleet, client, api_as, query, names):
    client.force_login(fleet.alice)
    assert set(rows(client, query)) == names
    listed = api_as(fleet.alice).get(f"/api/v1/agents{query}").json()
    assert {agent["name"] for agent in listed["results"]} == names


def test_an_unknown_filter_value_is_a_documented_error_not_a_500(fleet, client, api_as):
    client.force_login(fleet.alice)
    response = client.get("/agents/?health=sideways")
    assert response.status_code == 200 and "health" in response.content.decode()
    assert rows(client, "?health=sideways") == {}
    api = api_as(fleet.alice).get("/api/v1/agents?sync=sideways")
    assert api.status_code == 400 and api.json()["error"]["details"][0]["pointer"] == "/sync"


def test_the_api_filters_with_what_the_loop_registered(people, api_as, monkeypatch):
    assert filters.agent_filterset() is AgentStateFilterSet
    monkeypatch.setattr(filters, "_agent_filtersets", [])
    with pytest.raises(ImproperlyConfigured):
        filters.agent_filterset()
    with pytest.raises(ImproperlyConfigured):
        api_as(people.alice).get("/api/v1/agents?health=drifted")
