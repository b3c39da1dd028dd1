"""A TypeScript agent on the official MCP TypeScript SDK (`@modelcontextprotocol/sdk`) talks to
an MCP server through the governed MCP proxy (`agentctl mcp-proxy`), against a real control plane:
the approved tools work, a tool nobody approved and a server nobody approved are refused with
the rule named, and the server never runs what was refused."""

import json
import subprocess

import pytest

from config import embedded_redis
from runtime.models import BehaviourEvent
from tests.clients.test_mcp_proxy import (  # noqa: F401 (fixtures)
    AGENT,
    AGENTCTL,
    approved_support_agent,
    calls,
    http_upstream,
    start,
    state,
    stop,
)
from tests.clients.test_typescript import TS, node_modules, npm  # noqa: F401 (fixture)
from tests.conftest import child_env, eventually

CALLS = [["lookup_order", {"order_id": "42"}], ["delete_customer", {"customer_id": "c1"}]]


def typescript_agent(url: str, calls: list) -> dict:
    """What the TypeScript agent saw: the tools listed, and each call's outcome."""
    done = subprocess.run(["node", str(TS / "test" / "mcp-agent.mjs"), url, json.dumps(calls)],
                          cwd=TS, capture_output=True, text=True, timeout=120, env=child_env())
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def proxy(upstream: str, token: str, server_url: str, *args: str) -> tuple[subprocess.Popen, str]:
    port = embedded_redis.free_port()
    process = start([AGENTCTL, "mcp-proxy", "--agent", AGENT, "--upstream", upstream,
                     "--port", str(port), "--interval", "0.5", *args], port,
                    AGENTGOV_URL=server_url, AGENTGOV_TOKEN=token)
    return process, f"http://127.0.0.1:{port}/mcp"


@pytest.mark.timeout(600)
def test_a_typescript_mcp_client_gets_only_what_was_approved_through_the_proxy(
        node_modules, people, keys, server, state, http_upstream, start_worker):  # noqa: F811
    start_worker("ingest", "default")  # behaviour events are ingested by a worker
    agent, token = approved_support_agent(people, server, keys.alice, http_upstream)
    governed, url = proxy(http_upstream, token, server)
    try:
        seen = typescript_agent(url, CALLS)
        eventually(lambda: BehaviourEvent.objects.filter(agent=agent, tool="lookup_order")
                   .exists(), message="the TypeScript agent's call was not recorded as a "
                                      "behaviour event")
    finally:
        stop(governed)
    # the server offers delete_customer too; the agent is never shown it
    assert seen["tools"] == ["lookup_order", "refund_order"]
    found, deleted = seen["results"]
    assert found == {"tool": "lookup_order", "refused": False,
                     "text": "order 42: 2 mugs, delivered broken"}
    assert deleted["refused"]
    assert ("MCP tool 'delete_customer' is not approved for agent support-agent on server orders"
            in deleted["text"]), deleted

    # The same MCP server fronted as a server the spec does not approve: nothing is listed and
    # even the tool approved on "orders" is refused, naming the server.
    unapproved, url = proxy(http_upstream, token, server, "--server", "billing")
    try:
        seen = typescript_agent(url, [["lookup_order", {"order_id": "43"}]])
    finally:
        stop(unapproved)
    assert seen["tools"] == []
    (refused,) = seen["results"]
    assert refused["refused"]
    assert ("MCP tool 'lookup_order' is not approved for agent support-agent on server billing"
            in refused["text"]), refused
    assert [call["tool"] for call in calls(state)] == ["lookup_order"]  # refused calls never ran
    assert calls(state)[0]["arguments"] == {"order_id": "42"}
