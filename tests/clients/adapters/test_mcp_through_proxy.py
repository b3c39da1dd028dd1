"""A framework adapter's agent as the MCP client of the governed proxy, end to end: a real
`pydantic_ai.Agent` (FunctionModel, offline) governed by `agentgov.adapters.pydantic_ai.govern`,
whose MCP toolset is `agentctl mcp-proxy` in front of a real FastMCP server started in the test
(whose tools change mid-test), against a real control plane (daphne) and reconcile worker.

The story: the support agent keeps one MCP session open (a long-lived agent); it looks an order
up through the proxy (the gate lets the approved MCP tool through, the call is recorded); the
server's operator rewrites the tool's description; drift within one pass, the proxy stops
exposing the tool and the agent's next call of it (still in its cached tool list) fails with the
proxy's MCP error; carol accepts, bob approves the new fingerprint, and the call works again."""

import anyio
import pytest
from agentgov import Client
from agentgov.adapters import ToolRefused
from agentgov.adapters.pydantic_ai import govern
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from config import embedded_redis
from reconciliation.models import Finding
from registry import actions
from runtime.models import BehaviourEvent
from tests.clients.adapters.conftest import FAST, latest_report
from tests.clients.conftest import approve_new_version
from tests.clients.test_mcp_proxy import (  # noqa: F401 (fixtures)
    AGENT,
    AGENTCTL,
    POISONED,
    QUICK,
    approved_support_agent,
    finding,
    http_upstream,
    resolve,
    rug_pull,
    start,
    state,
    stop,
)
from tests.conftest import eventually


class Script:
    """The model: "look up ORDER" calls lookup_order on the MCP server, whether or not it is
    offered; it answers with what the tool (or the tool's error) said."""

    def __init__(self) -> None:
        self.offered: list[list[str]] = []

    def __call__(self, messages, info: AgentInfo) -> ModelResponse:
        self.offered.append(sorted(tool.name for tool in info.function_tools))
        last = messages[-1].parts
        answers = [str(part.content) for part in last
                   if isinstance(part, ToolReturnPart | RetryPromptPart)]
        if answers:
            return ModelResponse(parts=[TextPart(" | ".join(answers))])
        order = last[-1].content.split()[-1]
        return ModelResponse(parts=[ToolCallPart("lookup_order", {"order_id": order})])


def lookups(agent) -> list[str]:
    """The records of the lookup_order events: the adapter's gate reads the order id into
    `record`, the proxy records the call without one (both record every call that ran)."""
    return sorted(BehaviourEvent.objects.filter(agent=agent, tool="lookup_order")
                  .values_list("record", flat=True))


@pytest.fixture
def proxy_url(people, keys, server, http_upstream, start_worker):  # noqa: F811
    start_worker("reconcile", "ingest", "default", **QUICK)
    agent, agent_key = approved_support_agent(people, server, keys.alice, http_upstream)
    port = embedded_redis.free_port()
    proxy = start([AGENTCTL, "mcp-proxy", "--agent", AGENT, "--upstream", http_upstream,
                   "--port", str(port), "--interval", "0.5", "--decision-wait", "60"], port,
                  AGENTGOV_URL=server, AGENTGOV_TOKEN=agent_key)
    yield f"http://127.0.0.1:{port}/mcp", agent, agent_key
    stop(proxy)


def test_a_pydantic_ai_agent_behind_the_proxy_loses_a_rug_pulled_tool_until_bob_approves(
        people, keys, server, state, proxy_url):  # noqa: F811
    url, agent, agent_key = proxy_url
    script = Script()
    toolset = MCPToolset(url, id="orders")
    support = Agent(FunctionModel(script, model_name="gpt-4.1"), toolsets=[toolset])
    client = Client(server, agent_key, agent=AGENT, event_flush_interval=0.05)
    # the owner says the orders server is reached through the proxy (whose URL is not the
    # server's): the adapter reports it by name, the proxy reports where it is and its tools
    governor = govern(support, client=client, name=AGENT, proxied_mcp_servers=["orders"],
                      **FAST).start()

    async def story() -> None:
        async with toolset:  # one session for the whole story, as a long-lived agent keeps
            # the approved MCP tool runs through the gate and the proxy, and is recorded
            result = await support.run("look up 42")
            assert result.output == "order 42: 2 mugs, delivered broken"
            assert script.offered[0] == ["lookup_order", "refund_order"]
            await anyio.to_thread.run_sync(lambda: eventually(
                lambda: lookups(agent) == ["", "42"],
                message="the call was not recorded by the gate and the proxy"))
            assert not governor.refused

            # the rug pull: drift within one pass, the proxy stops exposing the tool, and the
            # agent's next call of it (its tool list is cached) fails with the proxy's error
            rug_pull(state, hidden=["delete_customer"], descriptions={"lookup_order": POISONED})
            changed = await anyio.to_thread.run_sync(lambda: eventually(
                lambda: finding(agent, "mcp_tool_changed"),
                message="the changed description was not detected as drift"))
            assert changed.pointer == "/mcp_servers/orders/tools/lookup_order"
            refused = await support.run("look up 43")
            assert "changed since it was approved" in refused.output
            assert "order 43" not in refused.output

            # carol accepts into a proposal with the new fingerprint, bob approves it, and
            # the same session's call works again (the proxy follows without a restart)
            carol = (await anyio.to_thread.run_sync(
                lambda: actions.issue_api_token(people.carol, actor="system:test")))[1]
            await anyio.to_thread.run_sync(resolve, server, carol, changed, "accept")
            proposal = await anyio.to_thread.run_sync(
                lambda: Finding.objects.get(pk=changed.pk).proposal)
            await anyio.to_thread.run_sync(
                lambda: actions.approve_proposal(proposal.pk, actor=people.bob))

            async def works() -> str:
                return (await support.run("look up 44")).output

            deadline = anyio.current_time() + 60
            output = await works()
            while output != "order 44: 2 mugs, delivered broken":
                assert anyio.current_time() < deadline, output
                await anyio.sleep(0.5)
                output = await works()

    try:
        anyio.run(story)
        # the refused call was never recorded: the calls before and after it were
        eventually(lambda: lookups(agent) == ["", "", "42", "44"],
                   message="the call that ran after bob's approval was not recorded")
    finally:
        governor.stop()
        client.close(timeout=5)

    # the adapter's report names the MCP server; the control plane kept the tools the proxy
    # listed for it (the adapter knows the server, not its tools)
    assert governor.binding.mcp_servers() == [{"name": "orders", "url": url}]
    assert governor.observe()["mcp_servers"] == [{"name": "orders"}]
    report = latest_report(agent)
    (orders,) = report["mcp_servers"]
    assert orders["name"] == "orders" and report["framework"] == "pydantic-ai"
    assert {tool["name"] for tool in orders["tools"]} >= {"lookup_order", "refund_order"}
    # so the proxy's URL in the agent's report is not read as the server moved elsewhere
    assert not Finding.objects.filter(agent=agent, kind__startswith="mcp_server").exists()


def test_the_gate_approves_an_mcp_tool_only_on_the_server_that_offers_it(
        agent_client, push_agent, people):
    """The gate's half, without the proxy: an MCP tool is approved by its own server's entry in
    `mcp_servers`; the same name on another server, or as a function tool, is not."""
    lookup = {"name": "lookup_order", "fingerprint": "a" * 64, "description": "Look it up."}
    approve_new_version(people, mcp_servers=[{"name": "orders", "transport": "http",
                                              "url": "http://127.0.0.1:8765/mcp",
                                              "tools": [lookup]}])
    support = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("-")]),
                                  model_name="gpt-4.1"))
    ran = []
    governor = govern(support, client=agent_client, name="refund-agent", **FAST)
    with governor:
        with pytest.raises(ToolRefused, match="tool lookup_order is not approved"):
            governor.gate("lookup_order", {"order_id": "7"}, lambda: ran.append("function"))
        anyio.run(lambda: governor.agate("lookup_order", {"order_id": "8"},
                                         _async(ran.append, "orders-async"), server="orders"))
    assert ran == ["orders-async"]
    assert governor.refused == [
        ("lookup_order", "tool lookup_order is not approved for this agent")]
    with governor:
        with pytest.raises(ToolRefused, match="lookup_order of MCP server crm is not approved"):
            anyio.run(lambda: governor.agate("lookup_order", {"order_id": "9"},
                                             _async(ran.append, "crm"), server="crm"))
    assert ran == ["orders-async"]
    recorded = eventually(lambda: list(BehaviourEvent.objects.filter(
        agent=push_agent, tool="lookup_order").values_list("record", flat=True)))
    assert recorded == ["8"]


def _async(function, *args):
    async def run():
        return function(*args)
    return run
