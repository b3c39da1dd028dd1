"""A refund agent built with Pydantic AI on its offline FunctionModel (no key, no network),
governed by agentgov in three lines (see `governed`).

    python agent.py register --token OWNER_TOKEN
    python agent.py run [--orders N]   # AGENTGOV_URL, AGENTGOV_TOKEN, AGENTGOV_AGENT
"""

import sys
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from governed_example import RESOURCES, main  # noqa: E402


def offline_model(messages, info: AgentInfo) -> ModelResponse:
    """Stands in for gpt-4.1: "lookup ORDER" and "refund ORDER AMOUNT" become tool calls."""
    returns = [part for message in messages for part in getattr(message, "parts", [])
               if isinstance(part, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(" | ".join(str(r.content) for r in returns))])
    words = messages[-1].parts[-1].content.split()
    calls = [ToolCallPart("orders.lookup", {"order": words[1]}, tool_call_id="lookup")]
    if words[0] == "refund":
        calls.append(ToolCallPart("payments.refund", {"order": words[1],
                                                      "amount": float(words[2])},
                                  tool_call_id="refund"))
    return ModelResponse(parts=calls)


def build_agent() -> Agent:
    """The owner's agent: nothing in it knows about governance."""
    agent = Agent(FunctionModel(offline_model, model_name="gpt-4.1"), name="refund-agent")

    @agent.tool_plain(name="orders.lookup")
    def lookup(order: str) -> str:
        return f"{order}: damaged in transit"

    @agent.tool_plain(name="payments.refund")
    def refund(order: str, amount: float) -> str:
        return f"refunded ${amount:.0f} for {order}"

    return agent


def governed():
    agent = build_agent()
    # The three lines that govern it:
    from agentgov import Client
    from agentgov.adapters.pydantic_ai import govern
    governor = govern(agent, client=Client.from_env(), resources=RESOURCES).start()
    return agent, governor


def ask(agent: Agent, text: str) -> str:
    return agent.run_sync(text).output


if __name__ == "__main__":
    sys.exit(main(HERE, governed, ask))
