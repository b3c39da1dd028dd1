"""The framework adapters are optional extras of the client: one installs on its own into a
fresh virtualenv (without Django or any other framework), and the control plane's own
dependencies contain no agent framework."""

import subprocess
import tomllib

import pytest

from tests.conftest import ROOT, fresh_venv, installed

pytestmark = pytest.mark.long(minutes=1)

FRAMEWORKS = ("langgraph", "langchain", "openai-agents", "openai", "pydantic-ai",
              "pydantic-ai-slim", "crewai", "mcp", "fastmcp", "autogen")


def requirement_name(requirement: str) -> str:
    for stop in "<>=!~[; ":
        requirement = requirement.split(stop)[0]
    return requirement.strip().lower().replace("_", "-")


def test_the_control_plane_depends_on_no_agent_framework():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {requirement_name(r) for r in project["dependencies"]}
    assert names and not names & set(FRAMEWORKS)
    client = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())
    extras = client["project"]["optional-dependencies"]
    assert {requirement_name(r) for r in client["project"]["dependencies"]} == {
        "httpx", "cryptography"}  # frameworks only ever come in through an extra
    assert {"langgraph", "openai-agents", "pydantic-ai"} <= set(extras)


# Per extra: its framework's distribution, and a script that builds a real agent object in the
# fresh venv and reads it through the adapter's binding (no control plane needed for that).
SMOKE = {
    "pydantic-ai": ("pydantic-ai-slim", (
        "from pydantic_ai import Agent\n"
        "from pydantic_ai.models.test import TestModel\n"
        "from agentgov.adapters.pydantic_ai import PydanticAIBinding\n"
        "agent = Agent(TestModel(model_name='gpt-4.1'))\n"
        "@agent.tool_plain(name='orders.lookup')\n"
        "def lookup(order: str) -> str:\n"
        "    return order\n"
        "binding = PydanticAIBinding(agent)\n"
        "print(binding.tools(), binding.model().model_name)\n")),
    "openai-agents": ("openai-agents", (
        "from agents import Agent, function_tool\n"
        "from agentgov.adapters.openai_agents import OpenAIAgentsBinding\n"
        "@function_tool(name_override='orders.lookup')\n"
        "def lookup(order: str) -> str:\n"
        "    \"\"\"Look an order up.\"\"\"\n"
        "    return order\n"
        "binding = OpenAIAgentsBinding(Agent(name='a', model='gpt-4.1', tools=[lookup]))\n"
        "print(binding.tools(), binding.model())\n")),
    "langgraph": ("langgraph", (
        "from langchain_core.language_models.fake_chat_models import GenericFakeChatModel\n"
        "from langchain_core.tools import StructuredTool\n"
        "from langgraph.prebuilt import ToolNode\n"
        "from langgraph.graph import StateGraph, MessagesState\n"
        "from agentgov.adapters.langgraph import LangGraphBinding\n"
        "def lookup(order: str) -> str:\n"
        "    \"\"\"Look an order up.\"\"\"\n"
        "    return order\n"
        "graph = StateGraph(MessagesState)\n"
        "graph.add_node('tools', ToolNode([StructuredTool.from_function(lookup, "
        "name='orders.lookup')]))\n"
        "graph.set_entry_point('tools')\n"
        "binding = LangGraphBinding(graph.compile())\n"
        "print(binding.tools(), 'gpt-4.1')\n")),
}
OTHERS = {"django", "langgraph", "openai-agents", "pydantic-ai-slim"}


@pytest.mark.timeout(1200)  # a pip install on a loaded 2-core machine
@pytest.mark.parametrize("extra", sorted(SMOKE))
def test_each_extra_installs_on_its_own_in_a_fresh_venv(tmp_path, extra):
    distribution, script = SMOKE[extra]
    python = fresh_venv(tmp_path / "venv", f"{ROOT / 'clients' / 'python'}[{extra}]")
    packages = set(installed(python))
    assert {distribution, "agentgov-client"} <= packages
    assert not packages & (OTHERS - {distribution})  # no Django, no other framework
    ran = subprocess.run([str(python), "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert ran.stdout.strip() == "['orders.lookup'] gpt-4.1", ran.stderr[-2000:]
