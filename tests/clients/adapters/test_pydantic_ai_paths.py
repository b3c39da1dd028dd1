"""Pydantic AI: every way a tool reaches a run is gated. An owner (or a prompt-injected model)
attaching tools as toolsets, wrapped toolsets, per-run toolsets or MCP toolsets gets no call
past the gate that the approved state does not allow; what the adapter cannot gate (a
provider-run native tool) stops `start()`."""

import json

import pytest
from agentgov.adapters import Ungovernable
from agentgov.adapters.governed import ToolRefused, describe_mcp_server
from agentgov.adapters.pydantic_ai import govern
from fastmcp import FastMCP
from pydantic_ai import Agent
from pydantic_ai.capabilities import WebSearch
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.toolsets import CombinedToolset, FunctionToolset

from audit.models import AuditEntry
from reconciliation.models import Finding
from tests.clients.adapters.conftest import (
    FAST,
    RESOURCES,
    events,
    gained_tool_is_corrected_in_place,
    latest_report,
)
from tests.clients.conftest import approve_new_version
from tests.conftest import eventually


def caller(messages, info: AgentInfo) -> ModelResponse:
    """The model: "NAME {json args}" calls that tool once, then repeats what it returned."""
    returns = [part for message in messages for part in getattr(message, "parts", [])
               if isinstance(part, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(" | ".join(str(r.content) for r in returns))])
    name, _, arguments = messages[-1].parts[-1].content.partition(" ")
    return ModelResponse(parts=[ToolCallPart(name, json.loads(arguments or "{}"))])


def toolset(ran: list) -> FunctionToolset:
    """The owner's tools in a toolset of their own (not the agent's function toolset)."""
    tools = FunctionToolset()

    @tools.tool_plain(name="payments.refund")
    def refund(order: str, amount: float) -> str:
        ran.append(("payments.refund", order, amount))
        return f"refunded {amount:g}"

    @tools.tool_plain(name="crm.export")
    def export(segment: str) -> str:
        ran.append(("crm.export", segment))
        return "exported"

    return tools


def test_tools_in_toolsets_wrapped_or_not_are_observed_and_gated(agent_client, push_agent):
    ran: list = []
    tools = toolset(ran)
    agent = Agent(FunctionModel(caller, model_name="gpt-4.1"), toolsets=[tools])
    governor = govern(agent, client=agent_client, name="refund-agent", resources=RESOURCES,
                      **{**FAST, "decision_wait": 0.5})
    with governor:
        # observed: the toolset's tools are what the framework will call
        eventually(lambda: governor.applied is not None)
        assert latest_report(push_agent)["tools"] == ["crm.export", "payments.refund"]

        assert "refunded 120" in agent.run_sync(
            'payments.refund {"order": "o-1", "amount": 120}').output
        held = agent.run_sync('payments.refund {"order": "o-2", "amount": 800}').output
        assert "no human answered in time" in held
        assert "not approved" in agent.run_sync('crm.export {"segment": "all"}').output

        # the same unapproved tool behind every wrapper the framework offers
        wrapped = {
            "x_crm.export": tools.prefixed("x"),
            "crm.export": tools.filtered(lambda ctx, tool: True),
            "export_all": tools.renamed({"export_all": "crm.export"}),
        }
        for name, wrapper in wrapped.items():
            again = Agent(FunctionModel(caller, model_name="gpt-4.1"), toolsets=[wrapper])
            govern(again, client=agent_client, name="refund-agent", **FAST).apply(
                governor.applied)
            assert "not approved" in again.run_sync(f'{name} {{"segment": "all"}}').output
        combined = Agent(FunctionModel(caller, model_name="gpt-4.1"),
                         toolsets=[CombinedToolset([tools.approval_required()])])
        other = govern(combined, client=agent_client, name="refund-agent", **FAST)
        other.apply(governor.applied)
        assert other.binding.tools() == ["crm.export", "payments.refund"]

        # a toolset handed to one run only
        bare = Agent(FunctionModel(caller, model_name="gpt-4.1"))
        govern(bare, client=agent_client, name="refund-agent", **FAST).apply(governor.applied)
        assert "not approved" in bare.run_sync('crm.export {"segment": "vip"}',
                                               toolsets=[toolset(ran)]).output
    assert ran == [("payments.refund", "o-1", 120.0)]
    assert [e.tool for e in eventually(lambda: events(push_agent, kind="tool_call"))] == [
        "payments.refund"]


def test_an_mcp_toolset_is_gated_and_known_by_where_its_server_is(agent_client, push_agent,
                                                                  people):
    approve_new_version(people, mcp_servers=[{
        "name": "orders", "transport": "http", "url": "http://127.0.0.1:8765/mcp",
        "tools": [{"name": "lookup_order", "fingerprint": "a" * 64}]}])
    # named after its URL's host, spelled with a trailing slash: still the approved "orders" server
    remote = MCPToolset("http://127.0.0.1:8765/mcp/", id="127-0-0-1")
    agent = Agent(FunctionModel(caller, model_name="gpt-4.1"), toolsets=[remote])
    governor = govern(agent, client=agent_client, name="refund-agent", **FAST)
    with governor:
        eventually(lambda: governor.applied is not None)
        assert governor.mcp_server_name(describe_mcp_server(remote)) == "orders"
        assert governor.observe()["mcp_servers"][0]["name"] == "orders"

    # a server the spec does not name (in-process FastMCP): its tools never run
    upstream, refunds = FastMCP("shop"), []

    @upstream.tool
    def refund_order(order_id: str, amount: float) -> str:
        refunds.append(amount)
        return "refunded"

    unknown = Agent(FunctionModel(caller, model_name="gpt-4.1"),
                    toolsets=[MCPToolset(upstream, id="shop")])
    with govern(unknown, client=agent_client, name="refund-agent", **FAST):
        refused = unknown.run_sync('refund_order {"order_id": "9", "amount": 800}').output
    assert "of MCP server shop is not approved" in refused and refunds == []


def test_a_provider_run_native_tool_stops_start(agent_client, push_agent):
    agent = Agent(FunctionModel(caller, model_name="gpt-4.1"), capabilities=[WebSearch()])
    with pytest.raises(Ungovernable, match="native tool web_search"):
        govern(agent, client=agent_client, name="refund-agent", **FAST).start()
    assert not push_agent.observations.exists()


def test_a_native_tool_a_run_brings_refuses_that_run(agent_client, push_agent):
    """A provider-run tool given to one run (capabilities on the run, or an override) is out of
    the gate's sight: the run stops before the model is asked, and nothing runs."""
    calls: list = []

    def counting(messages, info: AgentInfo) -> ModelResponse:
        calls.append(messages)
        return caller(messages, info)

    agent = Agent(FunctionModel(counting, model_name="gpt-4.1"))
    with govern(agent, client=agent_client, name="refund-agent", **FAST) as governor:
        eventually(lambda: governor.applied is not None)
        with pytest.raises(ToolRefused, match="this run brings native tool web_search"):
            agent.run_sync("look it up", capabilities=[WebSearch()])
        with agent.override(native_tools=[WebSearchTool()]), \
                pytest.raises(ToolRefused, match="native tool web_search"):
            agent.run_sync("look it up")
    assert calls == []


def test_the_gate_refuses_before_the_first_desired_state(agent_client, push_agent):
    ran: list = []
    agent = Agent(FunctionModel(caller, model_name="gpt-4.1"), toolsets=[toolset(ran)])
    governor = govern(agent, client=agent_client, name="refund-agent", **FAST)  # not started
    refused = agent.run_sync('payments.refund {"order": "o-1", "amount": 1}').output
    assert "no approved state yet" in refused and ran == []
    assert governor.refused == [("payments.refund", "the agent has no approved state yet")]


def test_a_tool_present_before_the_first_apply_is_a_finding_then_corrected(agent_client,
                                                                           push_agent):
    """Not removed silently at start: reported, found as drift (a finding, audited), and
    removed by the control plane's correction; refused by the gate meanwhile."""
    ran: list = []
    tools = toolset(ran)  # with the approved payments.refund...
    tools.tools.pop("crm.export")

    @tools.tool_plain(name="orders.lookup")  # ...and orders.lookup
    def lookup(order: str) -> str:
        return order

    @tools.tool_plain(name="crm.search")  # and one it was never approved for
    def search(query: str) -> str:
        ran.append(query)
        return "found"

    agent = Agent(FunctionModel(caller, model_name="gpt-4.1"), toolsets=[tools])
    with govern(agent, client=agent_client, name="refund-agent", **FAST) as governor:
        eventually(lambda: governor.applied is not None)
        assert "crm.search" in tools.tools  # still there after the first apply...
        assert "not approved" in agent.run_sync('crm.search {"query": "x"}').output
        gained_tool_is_corrected_in_place(push_agent, lambda: list(tools.tools))
    assert ran == []
    finding = Finding.objects.get(agent=push_agent, pointer="/tools/crm.search")
    assert AuditEntry.objects.filter(action="finding.opened",
                                     target=f"finding:{finding.pk}").exists()
