"""A refund agent built with the OpenAI Agents SDK on a scripted offline `Model` (no key, no
network), governed by agentgov in three lines (see `governed`).

    python agent.py register --token OWNER_TOKEN
    python agent.py run [--orders N]   # AGENTGOV_URL, AGENTGOV_TOKEN, AGENTGOV_AGENT
"""

import json
import sys
from pathlib import Path

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from governed_example import RESOURCES, main  # noqa: E402

set_tracing_disabled(True)  # the SDK's default trace exporter would call api.openai.com


class OfflineModel(Model):
    """Stands in for gpt-4.1: "lookup ORDER" and "refund ORDER AMOUNT" become tool calls."""

    model = "gpt-4.1"

    async def get_response(self, system_instructions, input, model_settings, tools,
                           output_schema, handoffs, tracing, **options) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        outputs = [item["output"] for item in items
                   if isinstance(item, dict) and item.get("type") == "function_call_output"]
        if outputs:
            text = ResponseOutputText(text=" | ".join(map(str, outputs)), type="output_text",
                                      annotations=[])
            output = [ResponseOutputMessage(id="msg", role="assistant", status="completed",
                                            type="message", content=[text])]
        else:
            words = next(item["content"] for item in items
                         if isinstance(item, dict) and item.get("role") == "user").split()
            calls = [("orders.lookup", {"order": words[1]})]
            if words[0] == "refund":
                calls.append(("payments.refund", {"order": words[1], "amount": float(words[2])}))
            output = [ResponseFunctionToolCall(id=f"fc-{i}", call_id=f"call-{i}", name=name,
                                               arguments=json.dumps(args), type="function_call",
                                               status="completed")
                      for i, (name, args) in enumerate(calls)]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("this example does not stream")


def build_agent() -> Agent:
    """The owner's agent: nothing in it knows about governance."""
    @function_tool(name_override="orders.lookup")
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"{order}: damaged in transit"

    @function_tool(name_override="payments.refund")
    def refund(order: str, amount: float) -> str:
        """Refund an order."""
        return f"refunded ${amount:.0f} for {order}"

    return Agent(name="refund-agent", model=OfflineModel(), tools=[lookup, refund])


def governed():
    agent = build_agent()
    # The three lines that govern it:
    from agentgov import Client
    from agentgov.adapters.openai_agents import govern
    governor = govern(agent, client=Client.from_env(), resources=RESOURCES).start()
    return agent, governor


def ask(agent: Agent, text: str) -> str:
    return Runner.run_sync(agent, text).final_output


if __name__ == "__main__":
    sys.exit(main(HERE, governed, ask))
