"""Query strings as an attacker writes them: no filter parameter chooses a database lookup, so
regular expressions, `contains`, `__` lookups and other injections on every list endpoint and
page are plain values, a clean 400, or ignored; never a 500 and never a slow query."""

import pytest

from reconciliation.models import Finding
from tests.conftest import BAD_DEPLOYMENT, REFUND_AGENT_YAML

pytestmark = pytest.mark.django_db

TIER_AGENT = (REFUND_AGENT_YAML.replace("name: refund-agent", "name: tier-agent")
              .replace("labels: {team: payments, env: prod}",
                       'labels: {"example.com/tier": gold, "a__b": "c", "regex": "abc"}'))


@pytest.fixture
def fleet(people, api_as, refund_agent):
    created = api_as(people.alice).post("/api/v1/manifests", TIER_AGENT,
                                        content_type="application/yaml")
    assert created.status_code == 201, created.content
    return api_as(people.alice)


def names(client, query: str) -> list[str]:
    response = client.get(f"/api/v1/agents?{query}")
    assert response.status_code == 200, response.content
    return [agent["name"] for agent in response.json()["results"]]


@pytest.mark.parametrize("query, expected", [
    ("label=team=payments", ["refund-agent"]),
    ("label=example.com/tier=gold", ["tier-agent"]),
    ("label=a__b=c", ["tier-agent"]),  # a key with "__" is a key, not a path or a lookup
    ("label=regex=abc", ["tier-agent"]),  # "regex" is the name of a label here
    ("label=contains=x", []),  # was a 500: `labels__contains` is a JSON lookup
    ("label=team__regex=pay", []),
    ("label=team__contains=pay", []),
    ("label=team__isnull=false", []),
    ("label=has_key=team", []),
    ("label=team=", []),
])
def test_label_keys_are_plain_keys(fleet, query, expected):
    assert names(fleet, query) == expected


@pytest.mark.parametrize("label", [
    "regex=^(.|.){0,20}!", "regex=(.|.)*!", "team=pay.*", "team=a=b", "=x", "novalue",
    "-team=x", "team=" + "a" * 64, "x" * 300 + "=y", "team=pay ments", "team=%00",
])
def test_a_label_filter_outside_the_label_rules_is_a_400(fleet, label):
    response = fleet.get("/api/v1/agents", {"label": label})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "malformed" and error["details"][0]["pointer"] == "/label"


@pytest.mark.parametrize("query", [
    "labels__regex=^(.|.){0,20}!", "owner__username__regex=(.|.)*!", "name__regex=(a+)+$",
    "lifecycle__in=active", "labels__contains=x", "o=labels", "ordering=-owner__password",
])
def test_unknown_parameters_choose_no_lookup(fleet, query):
    assert names(fleet, query) == ["refund-agent", "tier-agent"]


def test_the_agents_page_takes_the_same_filters(fleet, client, people):
    client.force_login(people.alice)
    page = client.get("/agents/", {"label": "example.com/tier=gold"}).content.decode()
    assert "/agents/tier-agent/" in page and "/agents/refund-agent/" not in page
    page = client.get("/agents/", {"label": "contains=x"})
    assert page.status_code == 200 and "/agents/" + "tier-agent/" not in page.content.decode()
    redos = client.get("/agents/", {"label": "regex=(.|.)*!"}).content.decode()
    assert 'role="alert"' in redos and "/agents/tier-agent/" not in redos


@pytest.mark.parametrize("path, query", [
    ("/api/v1/findings", "status=bogus"), ("/api/v1/findings", "severity=urgent"),
    ("/api/v1/findings", "source=elsewhere"), ("/api/v1/findings", "kind=" + "k" * 40),
    ("/api/v1/findings", "agent=" + "a" * 64),
    ("/api/v1/escalations", "status=closed"),
    ("/api/v1/proposals", "state=whatever"), ("/api/v1/proposals", "agent=" + "a" * 64),
    ("/api/v1/agents", "status=deleted"), ("/api/v1/agents", "q=" + "q" * 201),
])
def test_bad_values_on_every_list_endpoint_are_a_400(api_as, people, path, query):
    response = api_as(people.dana if "proposals" not in path else people.bob).get(
        f"{path}?{query}")
    assert response.status_code == 400, (path, query, response.content)
    assert set(response.json()["error"]) == {"code", "message", "details"}


@pytest.mark.parametrize("path", ["/api/v1/findings", "/api/v1/escalations",
                                  "/api/v1/proposals", "/api/v1/audit"])
@pytest.mark.parametrize("query", [
    "agent__name__regex=(.|.)*!", "agent__labels__contains=x", "status__regex=(a+)+$",
    "kind__contains=%", "reason__regex=.*", "actor__regex=(.|.)*!",
])
def test_lookups_in_parameter_names_are_ignored_on_every_list_endpoint(api_as, people, path,
                                                                       query):
    response = api_as(people.dana).get(f"{path}?{query}")
    assert response.status_code == 200, (path, query, response.content)


def test_findings_filters_are_exact_values(people, api_as, refund_agent):
    from reconciliation import actions
    from sandbox import actions as sandbox_actions
    sandbox_actions.sandbox_deploy(refund_agent, actor="system:test", changes=BAD_DEPLOYMENT,
                           reason="a bad deployment")
    actions.reconcile_agent(refund_agent.pk, trigger="manual")
    assert Finding.objects.exists()
    dana = api_as(people.dana)
    everything = dana.get("/api/v1/findings").json()["count"]
    assert dana.get("/api/v1/findings?agent=refund-agent").json()["count"] == everything
    assert dana.get("/api/v1/findings?agent=refund").json()["count"] == 0  # not a contains
    assert dana.get("/api/v1/findings?source=behaviour").json()["count"] == 0
    assert dana.get("/api/v1/findings?source=config").json()["count"] == everything
