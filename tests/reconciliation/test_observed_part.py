"""`PUT observed-state?part=mcp_servers`: the MCP proxy reports the servers it fronts without
erasing what the agent itself reported, and two proxies of one agent keep each other's."""

import pytest

from reconciliation.models import ObservedState
from registry import actions as registry_actions
from tests.conftest import refund_manifest

pytestmark = pytest.mark.django_db

PATH = "/api/v1/agents/refund-agent/observed-state"
ORDERS = {"name": "orders", "transport": "http", "url": "http://127.0.0.1:8765/mcp",
          "tools": [{"name": "lookup_order", "fingerprint": "a" * 64, "description": "Look."}]}
FILES = {"name": "files", "transport": "stdio", "command": "files-mcp", "tools": ["read"]}


def latest(agent) -> dict:
    return ObservedState.objects.filter(agent=agent).order_by("-observed_at").first().state


def test_a_part_replaces_its_servers_and_keeps_the_rest(agent_client, refund_agent):
    agent_client.put(PATH, {"tools": ["orders.lookup"], "running": True}, format="json")
    first = agent_client.put(f"{PATH}?part=mcp_servers", {"mcp_servers": [ORDERS]},
                             format="json")
    assert first.status_code == 202 and first.json()["changed"] is True
    agent_client.put(f"{PATH}?part=mcp_servers", {"mcp_servers": [FILES]}, format="json")
    assert latest(refund_agent) == {
        "tools": ["orders.lookup"], "running": True,
        "mcp_servers": [{**FILES, "tools": [{"name": "read"}]}, ORDERS]}
    # the same part again is a heartbeat, not a new history row
    again = agent_client.put(f"{PATH}?part=mcp_servers", {"mcp_servers": [ORDERS]},
                             format="json")
    assert again.json()["changed"] is False
    assert ObservedState.objects.filter(agent=refund_agent).count() == 3


@pytest.mark.parametrize(("query", "body", "pointer"), [
    ("?part=tools", {"tools": ["crm.search"]}, "/part"),
    ("?part=mcp_servers", {"mcp_servers": [ORDERS], "tools": []}, "/part"),
    ("?part=mcp_servers", {}, "/part"),
    ("?part=mcp_servers", {"mcp_servers": [{"name": "orders", "tools": [{"nme": "x"}]}]},
     "/mcp_servers/0/tools/0/nme"),
])
def test_a_bad_part_report_is_refused_and_stores_nothing(agent_client, refund_agent, query,
                                                         body, pointer):
    response = agent_client.put(f"{PATH}{query}", body, format="json")
    assert response.status_code == 422
    assert pointer in [d["pointer"] for d in response.json()["error"]["details"]]
    assert not ObservedState.objects.exists()


def test_an_agent_token_cannot_report_another_agents_mcp_servers(agent_client, people):
    doc = refund_manifest()
    object.__setattr__(doc, "name", "other-agent")
    registry_actions.apply_manifests([doc], actor=people.alice, source="yaml")
    response = agent_client.put("/api/v1/agents/other-agent/observed-state?part=mcp_servers",
                                {"mcp_servers": [ORDERS]}, format="json")
    assert response.status_code == 403
    assert not ObservedState.objects.exists()


def test_a_full_report_naming_servers_without_tools_keeps_the_tools_the_proxy_listed(
        agent_client, refund_agent):
    """A framework adapter knows which MCP servers the agent reaches, not what each offers: its
    heartbeat must not read as every tool the proxy listed being removed."""
    agent_client.put(f"{PATH}?part=mcp_servers", {"mcp_servers": [ORDERS]}, format="json")
    adapter_report = {"tools": ["orders.lookup"], "running": True,
                      "mcp_servers": [{"name": "orders", "url": ORDERS["url"]},
                                      {"name": "unlisted", "url": "http://127.0.0.1:9/mcp"}]}
    response = agent_client.put(PATH, adapter_report, format="json")
    assert response.status_code == 202, response.json()
    assert latest(refund_agent)["mcp_servers"] == [
        {"name": "orders", "url": ORDERS["url"], "tools": ORDERS["tools"]},
        {"name": "unlisted", "url": "http://127.0.0.1:9/mcp", "tools": []}]
    # the same report again is a heartbeat
    assert agent_client.put(PATH, adapter_report, format="json").json()["changed"] is False
