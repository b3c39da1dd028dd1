"""LangGraph: a real `create_react_agent` graph on LangChain's fake chat model (scripted tool
calls, offline) governed by three lines: observed from the graph, a hot-added tool removed in
place by the reconciler's correction, the refund above $500 held for bob, events recorded."""

import asyncio
import warnings

import pytest
from agentgov.adapters.langgraph import govern
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import create_react_agent

from runtime.models import Decision
from tests.clients.adapters.conftest import (
    FAST,
    RESOURCES,
    events,
    gained_tool_is_corrected_in_place,
    latest_report,
)
from tests.conftest import eventually


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, scripted: "refund ORDER AMOUNT" looks the order up and
    refunds it, "search X" calls crm.search when offered, tool results end the turn. Binds
    tools as a real chat model does and records the tools each request offered."""

    model_name: str = "gpt-4.1"
    offered: list = []
    bindings: list = []

    def bind_tools(self, tools, **kwargs):
        binding = self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)
        self.bindings.append(binding)
        return binding

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        offered = sorted(schema["function"]["name"] for schema in kwargs.get("tools", []))
        self.offered.append(offered)
        if isinstance(messages[-1], ToolMessage):
            results = [m.content for m in messages if isinstance(m, ToolMessage)]
            message = AIMessage(content=" | ".join(results))
        else:
            words = next(m for m in reversed(messages) if isinstance(m, HumanMessage)
                         ).content.split()
            if words[0] == "search" and "crm.search" in offered:
                calls = [("crm.search", {"query": words[1]})]
            else:
                order, amount = words[1], float(words[2])
                calls = [("orders.lookup", {"order": order}),
                         ("payments.refund", {"order": order, "amount": amount})]
            message = AIMessage(content="", tool_calls=[
                {"name": name, "args": args, "id": f"call-{name}-{len(self.offered)}"}
                for name, args in calls])
        return ChatResult(generations=[ChatGeneration(message=message)])


def refund_graph(model: ScriptedChatModel, refunded: list):
    """The owner's agent, written with no governance code in it."""
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"{order}: damaged in transit"

    def refund(order: str, amount: float) -> str:
        """Refund an order."""
        refunded.append((order, amount))
        return f"refunded {amount:.0f} for {order}"

    tools = [StructuredTool.from_function(lookup, name="orders.lookup"),
             StructuredTool.from_function(refund, name="payments.refund")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated for langchain's
        return create_react_agent(model, tools, name="refund-agent")


def ask(graph, text: str) -> str:
    return graph.invoke({"messages": [("user", text)]})["messages"][-1].content


@pytest.fixture
def governed(agent_client, push_agent):
    model = ScriptedChatModel(messages=iter([]), offered=[], bindings=[])
    refunded: list = []
    graph = refund_graph(model, refunded)
    governor = govern(graph, client=agent_client, name="refund-agent", resources=RESOURCES,
                      **FAST).start()
    eventually(lambda: governor.applied is not None)
    yield graph, model, refunded
    governor.stop()


def test_the_graph_is_observed_corrected_gated_and_recorded(governed, push_agent, bob):
    graph, model, refunded = governed
    report = latest_report(push_agent)
    assert report["framework"] == "langgraph" and report["model"] == "gpt-4.1"
    assert report["tools"] == ["orders.lookup", "payments.refund"]
    assert report["actions"]["payments.refund"] == {"approval_above": 500, "max": 5000}

    assert "refunded 120" in ask(graph, "refund order-0001 120")
    assert refunded == [("order-0001", 120.0)]
    lookup, = eventually(lambda: events(push_agent, tool="orders.lookup"))
    assert (lookup.resource, lookup.record) == ("orders_db", "order-0001")
    refund, = eventually(lambda: events(push_agent, kind="action"))
    assert (refund.action, refund.amount) == ("payments.refund", 120.0)

    # A deployment hot-adds a tool to the running graph: to its ToolNode and to the tool
    # schemas bound to the model. The gate refuses it until the correction removes it.
    def crm_search(query: str) -> str:
        """Search the CRM."""
        raise AssertionError("an unapproved tool ran")

    crm = StructuredTool.from_function(crm_search, name="crm.search")
    graph.nodes["tools"].bound.tools_by_name["crm.search"] = crm
    model.bindings[-1].kwargs["tools"].append(convert_to_openai_tool(crm))
    assert "not approved" in ask(graph, "search order-0001")
    assert "crm.search" in model.offered[-2] and not events(push_agent, tool="crm.search")
    gained_tool_is_corrected_in_place(
        push_agent, lambda: [*graph.nodes["tools"].bound.tools_by_name,
                             *(s["function"]["name"] for s in model.bindings[-1].kwargs["tools"])])
    ask(graph, "refund order-0002 80")
    assert model.offered[-1] == ["orders.lookup", "payments.refund"]

    with bob() as approver:
        ask(graph, "refund order-0003 900")
    assert approver.answered == 200 and ("order-0003", 900.0) in refunded
    decision = Decision.objects.get(request__amount=900)
    assert decision.decided_by.username == "bob"
    big, = eventually(lambda: events(push_agent, kind="action", amount=900))
    assert big.decision_id == str(decision.pk)


def test_the_async_path_is_gated_and_recorded_too(governed, push_agent):
    graph, model, refunded = governed
    result = asyncio.run(graph.ainvoke({"messages": [("user", "refund order-0011 40")]}))
    assert refunded == [("order-0011", 40.0)] and "refunded 40" in result["messages"][-1].content
    refund, = eventually(lambda: events(push_agent, kind="action"))  # only the gate records
    assert (refund.amount, refund.record) == (40.0, "order-0011")
