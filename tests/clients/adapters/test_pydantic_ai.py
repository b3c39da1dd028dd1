"""Pydantic AI: a real `pydantic_ai.Agent` on a FunctionModel (offline, scripted tool calls)
governed by three lines: observed from the object, a gained tool removed in place by the
reconciler's correction, the refund above $500 held for bob, events with no event code."""

import pytest
from agentgov import Forbidden
from agentgov.adapters import ToolRefused
from agentgov.adapters.pydantic_ai import govern
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from runtime.models import Decision
from tests.clients.adapters.conftest import (
    FAST,
    RESOURCES,
    events,
    gained_tool_is_corrected_in_place,
    latest_report,
    reconcile,
)
from tests.clients.conftest import approve_new_version
from tests.conftest import approved_agent, eventually


class Script:
    """The model: "refund ORDER AMOUNT" looks the order up and refunds it; "search X" uses
    crm.search when it is offered. Records which tools each request offered."""

    def __init__(self) -> None:
        self.offered: list[list[str]] = []

    def __call__(self, messages, info: AgentInfo) -> ModelResponse:
        offered = sorted(tool.name for tool in info.function_tools)
        self.offered.append(offered)
        returns = [part for message in messages for part in getattr(message, "parts", [])
                   if isinstance(part, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(" | ".join(str(r.content) for r in returns))])
        words = messages[-1].parts[-1].content.split()
        if words[0] == "search" and "crm.search" in offered:
            return ModelResponse(parts=[ToolCallPart("crm.search", {"query": words[1]})])
        order, amount = words[1], float(words[2])
        return ModelResponse(parts=[
            ToolCallPart("orders.lookup", {"order": order}, tool_call_id="lookup"),
            ToolCallPart("payments.refund", {"order": order, "amount": amount},
                         tool_call_id="refund")])


def refund_agent(script: Script) -> Agent:
    """The owner's agent, written with no governance code in it."""
    agent = Agent(FunctionModel(script, model_name="gpt-4.1"), name="refund-agent")
    agent.refunded = []

    @agent.tool_plain(name="orders.lookup")
    def lookup(order: str) -> str:
        return f"{order}: damaged in transit"

    @agent.tool_plain(name="payments.refund")
    def refund(order: str, amount: float) -> str:
        agent.refunded.append((order, amount))
        return f"refunded {amount:.0f} for {order}"

    return agent


@pytest.fixture
def governed(agent_client, push_agent):
    script = Script()
    agent = refund_agent(script)
    governor = govern(agent, client=agent_client, name="refund-agent", resources=RESOURCES,
                      **FAST).start()
    yield agent, script, governor
    governor.stop()


def test_the_agent_is_observed_corrected_gated_and_recorded(governed, push_agent, bob):
    agent, script, governor = governed
    # Observed from the object: its bound tools and model, and the rules its gate enforces.
    eventually(lambda: push_agent.observations.exists())
    report = latest_report(push_agent)
    assert report["framework"] == "pydantic-ai" and report["model"] == "gpt-4.1"
    assert report["tools"] == ["orders.lookup", "payments.refund"]
    assert report["actions"]["payments.refund"] == {"approval_above": 500, "max": 5000}
    assert report["running"] is True

    # A small refund runs and is recorded as behaviour events, with no event code.
    result = agent.run_sync("refund order-0001 120")
    assert agent.refunded == [("order-0001", 120.0)] and "refunded 120" in result.output
    lookup, = eventually(lambda: events(push_agent, tool="orders.lookup"))
    assert (lookup.resource, lookup.record) == ("orders_db", "order-0001")
    refund, = eventually(lambda: events(push_agent, kind="action"))
    assert (refund.action, refund.amount, refund.resource) == ("payments.refund", 120.0,
                                                               "payments")

    # The agent gains a tool at runtime: the gate refuses it before the correction lands...
    @agent.tool_plain(name="crm.search")
    def crm_search(query: str) -> str:
        raise AssertionError("an unapproved tool ran")

    refused = agent.run_sync("search order-0001")
    assert "not approved" in refused.output and script.offered[-2] == [
        "crm.search", "orders.lookup", "payments.refund"]
    assert not events(push_agent, tool="crm.search")
    # ...and the reconciler's correction removes it from what the model can call.
    gained_tool_is_corrected_in_place(push_agent, lambda: list(agent._function_toolset.tools))
    agent.run_sync("refund order-0002 80")
    assert script.offered[-1] == ["orders.lookup", "payments.refund"]

    # A refund above the $500 threshold waits for bob's decision, then runs.
    with bob() as approver:
        result = agent.run_sync("refund order-0003 900")
    assert approver.answered == 200
    assert ("order-0003", 900.0) in agent.refunded
    decision = Decision.objects.get(request__amount=900)
    assert decision.decided_by.username == "bob" and decision.status == "approved"
    big = eventually(lambda: events(push_agent, kind="action", amount=900))
    assert big[0].decision_id == str(decision.pk)


def test_a_refund_nobody_approves_is_refused_and_never_runs(agent_client, push_agent):
    agent = refund_agent(Script())
    governor = govern(agent, client=agent_client, name="refund-agent", resources=RESOURCES,
                      **{**FAST, "decision_wait": 0.5})
    with governor:
        result = agent.run_sync("refund order-0009 900")
    assert agent.refunded == [] and "no human answered in time" in result.output
    assert governor.refused == [("payments.refund",
                                 "payments.refund: no human answered in time")]


def test_a_removed_limit_is_reported_and_restored_by_the_correction(governed, push_agent):
    agent, script, governor = governed
    eventually(lambda: governor.applied is not None)  # the watch loop applied generation 1
    with governor._lock:  # someone in the process drops the $500 rule
        governor.rules.actions.pop("payments.refund")
    eventually(lambda: "payments.refund" not in latest_report(push_agent)["actions"])
    assert reconcile(push_agent) == "correcting"
    eventually(lambda: latest_report(push_agent)["actions"].get("payments.refund") == {
        "approval_above": 500, "max": 5000})
    eventually(lambda: reconcile(push_agent) == "converged")
    assert governor.rules.actions["payments.refund"]["approval_above"] == 500


def test_the_gate_enforces_data_scopes_and_record_limits(agent_client, push_agent, people):
    approve_new_version(
        people, tools=["orders.lookup", "payments.refund", "customers.read"],
        data=[{"resource": "orders_db", "access": "read"},
              {"resource": "payments", "access": "write"},
              {"resource": "customers_db", "access": "read"}])
    agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("-")]),
                                model_name="gpt-4.1"))
    reads = []

    @agent.tool_plain(name="customers.read")
    def read(customer: str) -> str:
        reads.append(customer)
        return customer

    governor = govern(agent, client=agent_client, name="refund-agent",
                      resources={**RESOURCES, "customers.read": "customers_db",
                                 "crm.search": "crm"}, **FAST)
    with governor:
        for _ in range(3):
            governor.gate("customers.read", {"customer": "c-7"}, lambda: read("c-7"))
        with pytest.raises(ToolRefused, match="record c-7 read 3 times"):
            governor.gate("customers.read", {"customer": "c-7"}, lambda: read("c-7"))
        governor.gate("customers.read", {"customer": "c-8"}, lambda: read("c-8"))
        governor.rules.tools.add("crm.search")  # even an approved tool needs its data scope
        with pytest.raises(ToolRefused, match="no approved access to crm"):
            governor.gate("crm.search", {"query": "x"}, lambda: reads.append("crm"))
    assert reads == ["c-7", "c-7", "c-7", "c-8"]
    eventually(lambda: len(events(push_agent, tool="customers.read")) == 4)


def test_an_agent_token_cannot_govern_another_agent(agent_client, push_agent, people):
    other = approved_agent(people, "other-agent", connector={"type": "push"})
    governor = govern(refund_agent(Script()), client=agent_client, name=other.name, **FAST)
    with pytest.raises(Forbidden):
        governor.start()
    assert not other.observations.exists()


def test_an_unchanged_agent_keeps_sending_heartbeats(governed, push_agent):
    agent, script, governor = governed
    eventually(lambda: governor.applied is not None)
    first = push_agent.observations.order_by("-observed_at").first()
    eventually(lambda: push_agent.observations.get(pk=first.pk).last_seen_at > first.last_seen_at)
    assert push_agent.observations.order_by("-observed_at").first().pk == first.pk
