"""A refund agent built with LangGraph (`create_react_agent`) on LangChain's offline fake chat
model (no key, no network), governed by agentgov in three lines (see `governed`).

    python agent.py register --token OWNER_TOKEN
    python agent.py run [--orders N]   # AGENTGOV_URL, AGENTGOV_TOKEN, AGENTGOV_AGENT
"""

import sys
import warnings
from pathlib import Path

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import create_react_agent

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from governed_example import RESOURCES, main  # noqa: E402


class OfflineChatModel(GenericFakeChatModel):
    """Stands in for gpt-4.1: "lookup ORDER" and "refund ORDER AMOUNT" become tool calls."""

    model_name: str = "gpt-4.1"

    def bind_tools(self, tools, **kwargs):
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            results = [m.content for m in messages if isinstance(m, ToolMessage)]
            message = AIMessage(content=" | ".join(results))
        else:
            words = next(m for m in reversed(messages) if isinstance(m, HumanMessage)
                         ).content.split()
            calls = [{"name": "orders.lookup", "args": {"order": words[1]}, "id": "lookup"}]
            if words[0] == "refund":
                calls.append({"name": "payments.refund", "id": "refund",
                              "args": {"order": words[1], "amount": float(words[2])}})
            message = AIMessage(content="", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=message)])


def build_agent():
    """The owner's agent: nothing in it knows about governance."""
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"{order}: damaged in transit"

    def refund(order: str, amount: float) -> str:
        """Refund an order."""
        return f"refunded ${amount:.0f} for {order}"

    tools = [StructuredTool.from_function(lookup, name="orders.lookup"),
             StructuredTool.from_function(refund, name="payments.refund")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # moved to langchain.agents, which is not installed
        return create_react_agent(OfflineChatModel(messages=iter([])), tools,
                                  name="refund-agent")


def governed():
    agent = build_agent()
    # The three lines that govern it:
    from agentgov import Client
    from agentgov.adapters.langgraph import govern
    governor = govern(agent, client=Client.from_env(), resources=RESOURCES).start()
    return agent, governor


def ask(agent, text: str) -> str:
    return agent.invoke({"messages": [("user", text)]})["messages"][-1].content


if __name__ == "__main__":
    sys.exit(main(HERE, governed, ask))
