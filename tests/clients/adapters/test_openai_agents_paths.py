"""OpenAI Agents SDK: every way a tool reaches a run is gated. A handoff's sub-agent runs its
tools through the governed agent's gate and is reported as delegation; a clone keeps the
gate; a tool the runner would execute out of the gate's sight (hosted MCP, shell, computer,
apply-patch, web search) stops `start()`, and one added later is never offered; a 401 stops
the run with a refusal."""

import json

import pytest
from agentgov.adapters import CredentialsRefused, Ungovernable
from agentgov.adapters.openai_agents import govern
from agents import (
    Agent,
    HostedMCPTool,
    Runner,
    ShellTool,
    WebSearchTool,
    function_tool,
    handoff,
    set_tracing_disabled,
)
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall

from registry import actions
from registry.models import ApiToken
from tests.clients.adapters.conftest import FAST, RESOURCES, latest_report
from tests.clients.adapters.test_openai_agents import say
from tests.conftest import eventually

set_tracing_disabled(True)


class Caller(Model):
    """"NAME {json}" calls that tool once (handing off first when this agent lacks it), then
    repeats what it returned."""

    async def get_response(self, system_instructions, input, model_settings, tools,
                           output_schema, handoffs, tracing, **options) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        items = [item for item in items if isinstance(item, dict)]
        name, _, arguments = next(item["content"] for item in items
                                  if item.get("role") == "user").partition(" ")
        called = {item["call_id"] for item in items
                  if item.get("type") == "function_call" and item.get("name") == name}
        outputs = [str(item["output"]) for item in items
                   if item.get("type") == "function_call_output" and item["call_id"] in called]
        if outputs:
            return ModelResponse(output=[say(" | ".join(outputs))], usage=Usage(),
                                 response_id=None)
        if name not in {tool.name for tool in tools} and handoffs:
            name, arguments = handoffs[0].tool_name, "{}"  # hand off to who can do it
        return ModelResponse(output=[ResponseFunctionToolCall(
            id=f"fc-{len(items)}", call_id=f"c-{len(items)}", name=name,
            arguments=arguments or "{}", type="function_call", status="completed")],
            usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise AssertionError("the tests run without streaming")


def tools(ran: list) -> list:
    @function_tool(name_override="payments.refund")
    def refund(order: str, amount: float) -> str:
        ran.append(("payments.refund", order, amount))
        return f"refunded {amount:g}"

    @function_tool(name_override="crm.export")
    def export(segment: str) -> str:
        ran.append(("crm.export", segment))
        return "exported"

    return [refund, export]


def run(agent, prompt: str) -> str:
    return str(Runner.run_sync(agent, prompt).final_output)


def test_a_handoff_runs_the_sub_agent_tools_through_the_gate(agent_client, push_agent):
    ran: list = []
    billing = Agent(name="billing", model=Caller(), tools=tools(ran))
    triage = Agent(name="triage", model=Caller(), handoffs=[handoff(billing)])
    governor = govern(triage, client=agent_client, name="refund-agent", resources=RESOURCES,
                      **{**FAST, "decision_wait": 0.5})
    with governor:
        eventually(lambda: governor.applied is not None)
        report = latest_report(push_agent)
        assert report["delegates_to"] == ["billing"]  # reported as delegation
        assert report["tools"] == ["crm.export", "payments.refund"]
        assert "not approved" in run(triage, json_call("crm.export", segment="all"))
        held = run(triage, json_call("payments.refund", order="o-9", amount=800))
        assert "no human answered in time" in held
        assert "refunded 40" in run(triage, json_call("payments.refund", order="o-1",
                                                      amount=40))

        # a clone, of the sub-agent or of the governed one, keeps the gate
        copy = billing.clone(name="billing-2")
        assert "not approved" in run(copy, json_call("crm.export", segment="vip"))
        # a handoff added after start is gated before the first turn can take it
        late = Agent(name="late", model=Caller(), tools=tools(ran))
        triage.handoffs.append(late)
        assert "not approved" in run(triage.clone(handoffs=[late]),
                                     json_call("crm.export", segment="late"))
    assert ran == [("payments.refund", "o-1", 40.0)]


def json_call(name: str, **arguments) -> str:
    return f"{name} {json.dumps(arguments)}"


@pytest.mark.parametrize("tool", [
    HostedMCPTool(tool_config={"type": "mcp", "server_label": "shop",
                               "server_url": "https://shop.example/mcp"}),
    ShellTool(executor=lambda request: "ran"),
    WebSearchTool(),
], ids=["hosted-mcp", "shell", "web-search"])
def test_a_tool_out_of_the_gates_sight_stops_start(agent_client, push_agent, tool):
    sub = Agent(name="helper", model=Caller(), tools=[tool])
    agent = Agent(name="front", model=Caller(), handoffs=[sub])
    with pytest.raises(Ungovernable, match=f"{type(tool).__name__}.*agent 'helper'"):
        govern(agent, client=agent_client, name="refund-agent", **FAST).start()
    assert not push_agent.observations.exists()


def test_a_tool_added_after_start_out_of_sight_is_never_offered(agent_client, push_agent):
    ran: list = []
    agent = Agent(name="front", model=Caller(), tools=tools(ran))
    governor = govern(agent, client=agent_client, name="refund-agent", resources=RESOURCES,
                      **FAST)
    with governor:
        eventually(lambda: governor.applied is not None)
        agent.tools.append(ShellTool(executor=lambda request: ran.append("shell")))
        run(agent, json_call("payments.refund", order="o-1", amount=5))
    assert ("ShellTool 'shell'", "the gate cannot see it run") in governor.refused
    assert "shell" not in ran


def test_a_revoked_token_stops_the_run_with_a_refusal(agent_client, push_agent, people):
    ran: list = []
    billing = Agent(name="billing", model=Caller(), tools=tools(ran))
    triage = Agent(name="triage", model=Caller(), handoffs=[billing])
    governor = govern(triage, client=agent_client, name="refund-agent", resources=RESOURCES,
                      **FAST)
    with governor:
        eventually(lambda: governor.applied is not None)
        for token in ApiToken.objects.filter(agent=push_agent):
            actions.revoke_api_token(token, actor=people.alice, reason="retired")
        eventually(lambda: governor.link.stopped)
        with pytest.raises(CredentialsRefused):
            run(triage, json_call("payments.refund", order="o-1", amount=5))
    assert ran == []
