"""LangGraph beyond `create_react_agent`: a custom node calling LangChain tools itself, and a
`ToolNode` inside a subgraph, are gated like the prebuilt agent's tools; a revoked token stops
the graph with a refusal."""

from typing import TypedDict

import pytest
from agentgov.adapters import CredentialsRefused, ToolRefused
from agentgov.adapters.langgraph import govern
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from registry import actions
from registry.models import ApiToken
from tests.clients.adapters.conftest import FAST, RESOURCES, events, latest_report
from tests.conftest import eventually


def owner_tools(ran: list) -> list[StructuredTool]:
    def refund(order: str, amount: float) -> str:
        ran.append(("payments.refund", order, amount))
        return f"refunded {amount:g}"

    def export(segment: str) -> str:
        ran.append(("crm.export", segment))
        return "exported"

    return [StructuredTool.from_function(refund, name="payments.refund",
                                         description="Refund an order."),
            StructuredTool.from_function(export, name="crm.export",
                                         description="Export customers.")]


class Job(TypedDict):
    tool: str
    args: dict
    result: str


def custom_graph(ran: list):
    """A node that picks a tool and calls it itself: no ToolNode anywhere."""
    by_name = {tool.name: tool for tool in owner_tools(ran)}

    def work(job: Job) -> dict:
        return {"result": str(by_name[job["tool"]].invoke(job["args"]))}

    graph = StateGraph(Job)
    graph.add_node("work", work)
    graph.add_edge(START, "work")
    graph.add_edge("work", END)
    return graph.compile()


def test_a_custom_node_calling_tools_is_gated(agent_client, push_agent):
    ran: list = []
    graph = custom_graph(ran)
    governor = govern(graph, client=agent_client, name="refund-agent", resources=RESOURCES,
                      **{**FAST, "decision_wait": 0.5})
    with governor:
        eventually(lambda: governor.applied is not None)
        done = graph.invoke({"tool": "payments.refund",
                             "args": {"order": "o-1", "amount": 120}})
        assert done["result"] == "refunded 120"
        with pytest.raises(ToolRefused, match="tool crm.export is not approved"):
            graph.invoke({"tool": "crm.export", "args": {"segment": "all"}})
        with pytest.raises(ToolRefused, match="no human answered in time"):
            graph.invoke({"tool": "payments.refund", "args": {"order": "o-2", "amount": 800}})
        with pytest.raises(ToolRefused, match="the rule reads the amount"):
            graph.invoke({"tool": "payments.refund", "args": {"order": "o-3"}})
        # what the custom node called is observed
        eventually(lambda: "crm.export" in governor.observe()["tools"])
    assert ran == [("payments.refund", "o-1", 120.0)]
    refund, = eventually(lambda: events(push_agent, kind="action"))
    assert (refund.action, refund.amount) == ("payments.refund", 120.0)


def test_a_tool_node_in_a_subgraph_is_gated_and_observed(agent_client, push_agent):
    ran: list = []
    inner = StateGraph(MessagesState)
    inner.add_node("tools", ToolNode(owner_tools(ran)))
    inner.add_edge(START, "tools")
    inner.add_edge("tools", END)
    outer = StateGraph(MessagesState)
    outer.add_node("billing", inner.compile())
    outer.add_edge(START, "billing")
    outer.add_edge("billing", END)
    graph = outer.compile()
    governor = govern(graph, client=agent_client, name="refund-agent", resources=RESOURCES,
                      **FAST)
    with governor:
        eventually(lambda: governor.applied is not None)
        assert latest_report(push_agent)["tools"] == ["crm.export", "payments.refund"]
        asked = AIMessage(content="", tool_calls=[
            {"name": "payments.refund", "args": {"order": "o-1", "amount": 50}, "id": "a"},
            {"name": "crm.export", "args": {"segment": "all"}, "id": "b"}])
        answers = [m for m in graph.invoke({"messages": [asked]})["messages"]
                   if isinstance(m, ToolMessage)]
    assert [m.content for m in answers][0] == "refunded 50"
    assert "not approved" in answers[1].content and answers[1].status == "error"
    assert ran == [("payments.refund", "o-1", 50.0)]
    # one check, one event: the ToolNode's gate and the callback gate did not both count it
    eventually(lambda: len(events(push_agent, tool="payments.refund")) == 1)


def test_a_revoked_token_stops_the_graph_with_a_refusal(agent_client, push_agent, people):
    ran: list = []
    graph = custom_graph(ran)
    governor = govern(graph, client=agent_client, name="refund-agent", resources=RESOURCES,
                      **FAST)
    with governor:
        eventually(lambda: governor.applied is not None)
        for token in ApiToken.objects.filter(agent=push_agent):
            actions.revoke_api_token(token, actor=people.alice, reason="retired")
        eventually(lambda: governor.link.stopped)
        with pytest.raises(CredentialsRefused):
            graph.invoke({"tool": "payments.refund", "args": {"order": "o-1", "amount": 5}})
    assert ran == []
