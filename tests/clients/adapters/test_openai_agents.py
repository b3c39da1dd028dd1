"""OpenAI Agents SDK: a real `agents.Agent` run by the real `Runner` on a scripted `Model`
(offline, no key) governed by three lines: observed from the object, a gained tool and a
swapped model corrected in place, the refund above $500 held for bob, events recorded."""

import dataclasses
import json

import anyio
import pytest
from agentgov.adapters.openai_agents import govern
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
from agents.models.interface import Model
from agents.usage import Usage
from django.db import transaction
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from reconciliation.actions import suspend_agent
from reconciliation.models import Finding
from runtime.models import Decision
from tests.clients.adapters.conftest import (
    FAST,
    RESOURCES,
    events,
    gained_tool_is_corrected_in_place,
    latest_report,
    reconcile,
)
from tests.conftest import eventually

set_tracing_disabled(True)  # the SDK's trace exporter would call api.openai.com


def call(name: str, arguments: dict, call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=f"fc-{call_id}", call_id=call_id, name=name,
                                    arguments=json.dumps(arguments), type="function_call",
                                    status="completed")


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id="msg", role="assistant", status="completed", type="message",
                                 content=[ResponseOutputText(text=text, type="output_text",
                                                             annotations=[])])


class ScriptedModel(Model):
    """"refund ORDER AMOUNT" looks the order up and refunds it; "search X" calls crm.search
    when offered; after tool results it answers with them. Records the tools offered."""

    def __init__(self, model: str = "gpt-4.1") -> None:
        self.model = model
        self.offered: list[list[str]] = []

    async def get_response(self, system_instructions, input, model_settings, tools,
                           output_schema, handoffs, tracing, **options) -> ModelResponse:
        offered = sorted(tool.name for tool in tools)
        self.offered.append(offered)
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        outputs = [item["output"] for item in items
                   if isinstance(item, dict) and item.get("type") == "function_call_output"]
        if outputs:
            output = [say(" | ".join(str(o) for o in outputs))]
        else:
            words = next(item["content"] for item in items
                         if isinstance(item, dict) and item.get("role") == "user").split()
            if words[0] == "search" and "crm.search" in offered:
                output = [call("crm.search", {"query": words[1]}, "c-crm")]
            else:
                order, amount = words[1], float(words[2])
                output = [call("orders.lookup", {"order": order}, "c-lookup"),
                          call("payments.refund", {"order": order, "amount": amount},
                               "c-refund")]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the tests run without streaming")


def refund_agent(model: ScriptedModel) -> Agent:
    """The owner's agent, written with no governance code in it."""
    refunded: list = []

    @function_tool(name_override="orders.lookup")
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"{order}: damaged in transit"

    @function_tool(name_override="payments.refund")
    def refund(order: str, amount: float) -> str:
        """Refund an order."""
        refunded.append((order, amount))
        return f"refunded {amount:.0f} for {order}"

    agent = Agent(name="refund-agent", model=model, tools=[lookup, refund])
    agent.refunded = refunded
    return agent


@pytest.fixture
def governed(agent_client, push_agent):
    model = ScriptedModel()
    agent = refund_agent(model)
    governor = govern(agent, client=agent_client, name="refund-agent", resources=RESOURCES,
                      **FAST).start()
    eventually(lambda: governor.applied is not None)
    yield agent, model, governor
    governor.stop()


def test_the_agent_is_observed_corrected_gated_and_recorded(governed, push_agent, bob):
    agent, model, governor = governed
    report = latest_report(push_agent)
    assert report["framework"] == "openai-agents" and report["model"] == "gpt-4.1"
    assert report["tools"] == ["orders.lookup", "payments.refund"]
    assert report["actions"]["payments.refund"] == {"approval_above": 500, "max": 5000}

    result = Runner.run_sync(agent, "refund order-0001 120")
    assert agent.refunded == [("order-0001", 120.0)] and "refunded 120" in result.final_output
    lookup, = eventually(lambda: events(push_agent, tool="orders.lookup"))
    assert (lookup.resource, lookup.record) == ("orders_db", "order-0001")
    refund, = eventually(lambda: events(push_agent, kind="action"))
    assert (refund.action, refund.amount) == ("payments.refund", 120.0)

    # The agent gains a tool at runtime; the gate refuses it until the correction removes it.
    @function_tool(name_override="crm.search")
    def crm_search(query: str) -> str:
        """Search the CRM."""
        raise AssertionError("an unapproved tool ran")

    agent.tools.append(crm_search)
    refused = Runner.run_sync(agent, "search order-0001")
    assert "not approved" in refused.final_output and "crm.search" in model.offered[-2]
    assert not events(push_agent, tool="crm.search")
    gained_tool_is_corrected_in_place(push_agent, lambda: [tool.name for tool in agent.tools])
    Runner.run_sync(agent, "refund order-0002 80")
    assert model.offered[-1] == ["orders.lookup", "payments.refund"]

    with bob() as approver:
        Runner.run_sync(agent, "refund order-0003 900")
    assert approver.answered == 200 and ("order-0003", 900.0) in agent.refunded
    decision = Decision.objects.get(request__amount=900)
    assert decision.decided_by.username == "bob"
    big, = eventually(lambda: events(push_agent, kind="action", amount=900))
    assert big.decision_id == str(decision.pk)


def test_a_swapped_model_is_swapped_back_by_the_correction(governed, push_agent):
    agent, model, governor = governed
    agent.model = ScriptedModel("gpt-4o-mini")  # a deployment swaps the model
    eventually(lambda: latest_report(push_agent).get("model") == "gpt-4o-mini")
    assert reconcile(push_agent) == "correcting"
    eventually(lambda: agent.model is model, message="the approved model was not restored")
    eventually(lambda: latest_report(push_agent).get("model") == "gpt-4.1")
    eventually(lambda: reconcile(push_agent) == "converged")
    assert Finding.objects.get(agent=push_agent, pointer="/model").status == "corrected"
    Runner.run_sync(agent, "refund order-0004 20")
    assert model.offered  # the approved model answered the next run


def test_a_suspended_agent_calls_no_tool(governed, push_agent, people):
    agent, model, governor = governed
    with transaction.atomic():
        suspend_agent(push_agent, actor=people.bob, reason="incident 42")
    eventually(lambda: latest_report(push_agent).get("running") is False)
    result = Runner.run_sync(agent, "refund order-0005 20")
    assert agent.refunded == [] and "suspended" in result.final_output


def test_its_mcp_servers_are_read_from_the_object(agent_client, push_agent):
    agent = refund_agent(ScriptedModel())
    agent.mcp_servers = [
        MCPServerStreamableHttp(params={"url": "http://127.0.0.1:9/mcp"}, name="payments-mcp"),
        MCPServerStdio(params={"command": "python", "args": ["-m", "orders_mcp"]},
                       name="orders-mcp")]
    governor = govern(agent, client=agent_client, name="refund-agent", **FAST)
    with governor:
        assert governor.binding.mcp_servers() == [
            {"name": "payments-mcp", "url": "http://127.0.0.1:9/mcp"},
            {"name": "orders-mcp", "command": "python -m orders_mcp"}]
        report = latest_report(push_agent)
    # Reported under `mcp_servers` where the control plane's spec has MCP servers; a control
    # plane without them refuses the key, and the rest of the state is still reported.
    assert report["tools"] == ["orders.lookup", "payments.refund"]
    assert sorted(server["name"] for server in report.get("mcp_servers", [])) in (
        [], ["orders-mcp", "payments-mcp"])
    assert governor.report_mcp_servers == ("mcp_servers" in report)


@pytest.mark.parametrize("amount", ["900", "NaN", None])
def test_an_amount_the_gate_cannot_compare_is_not_waved_through(agent_client, push_agent,
                                                                amount):
    class Sly(ScriptedModel):
        """Sends the refund's amount as a string (the tool's validation would take "900"),
        as NaN (every comparison false), or not at all."""

        async def get_response(self, *args, **kwargs):
            response = await super().get_response(*args, **kwargs)
            for item in response.output:
                if getattr(item, "name", "") == "payments.refund":
                    arguments = json.loads(item.arguments)
                    arguments["amount"] = amount
                    item.arguments = json.dumps(arguments)
            return response

    agent = refund_agent(Sly())
    governor = govern(agent, client=agent_client, name="refund-agent", resources=RESOURCES,
                      **{**FAST, "decision_wait": 0.5})
    with governor:
        Runner.run_sync(agent, "refund order-0007 900")
    assert agent.refunded == []
    assert [tool for tool, _ in governor.refused] == ["payments.refund"]


def test_an_mcp_tool_is_gated_by_its_own_servers_entry(agent_client, push_agent, people):
    """The SDK turns each MCP tool into a FunctionTool bound to its server; the gate approves
    it by that server's entry in `mcp_servers` (not by `tools`), and refuses the same name
    from another server without calling it."""
    import mcp.types
    from agentgov.adapters.openai_agents import _gated, _server_names
    from agents.mcp import MCPServerStreamableHttp, MCPUtil

    from tests.clients.conftest import approve_new_version

    lookup = {"name": "lookup_order", "fingerprint": "a" * 64, "description": "Look it up."}
    approve_new_version(people, mcp_servers=[{"name": "orders", "transport": "http",
                                              "url": "http://127.0.0.1:9/mcp",
                                              "tools": [lookup]}])
    agent = refund_agent(ScriptedModel())
    orders = MCPServerStreamableHttp(params={"url": "http://127.0.0.1:9/mcp"}, name="orders")
    crm = MCPServerStreamableHttp(params={"url": "http://127.0.0.1:9/crm"}, name="crm")
    agent.mcp_servers = [orders, crm]
    ran = []

    def sdk_tool(server):
        tool = MCPUtil.to_function_tool(
            mcp.types.Tool(name="lookup_order", description="Look it up.",
                           inputSchema={"type": "object", "properties": {}}),
            server, convert_schemas_to_strict=False)

        async def invoke(context, arguments):  # instead of the network call
            ran.append(server.name)
            return "found"
        return dataclasses.replace(tool, on_invoke_tool=invoke)

    governor = govern(agent, client=agent_client, name="refund-agent", **FAST)
    with governor:
        servers = _server_names(agent, governor)
        approved = _gated(sdk_tool(orders), governor, servers)
        other = _gated(sdk_tool(crm), governor, servers)
        assert anyio.run(approved.on_invoke_tool, None, '{"order_id": "8"}') == "found"
        refused = anyio.run(other.on_invoke_tool, None, '{"order_id": "9"}')
    assert ran == ["orders"]
    assert "lookup_order of MCP server crm is not approved" in refused
