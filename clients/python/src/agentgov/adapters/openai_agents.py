"""OpenAI Agents SDK: govern an `agents.Agent` (extra `openai-agents`).

The gate sits where the runner gets an agent's tools for a turn (`get_all_tools`, asked of the
agent that runs the turn): every function tool it returns (the agent's own and its MCP
servers') is wrapped so its call passes the gate. The same gate is installed on every agent
the governed one can hand off to or call as a tool (found again at each turn, so a handoff
added later is gated before it can be taken) and on every `clone()` of a gated agent, so a
sub-agent's tools run under the governed agent's approved state. Handoffs are reported as
delegation (`delegates_to`).

Tools the runner executes outside a function call (hosted tools run by OpenAI: web search,
file search, code interpreter, image generation, hosted MCP; and local shell, computer,
apply-patch and custom tools) are refused at `start()`; one added later is withheld from the
model (never offered, so never run) and recorded as refused."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from agents import Agent, FunctionTool, Handoff
from agents.exceptions import AgentsException

from agentgov.adapters.governed import (
    CredentialsRefused,
    Governor,
    ToolRefused,
    describe_mcp_server,
)
from agentgov.client import Client

FRAMEWORK = "openai-agents"


class RunStopped(CredentialsRefused, AgentsException):
    """CredentialsRefused as the SDK lets it through: the runner wraps any other exception
    from a tool in a UserError, so the owner's code would not see a refusal."""


def _handoff_agent(handoff: Any) -> Any:
    """The agent a handoff leads to (an Agent, or a Handoff keeping a reference to one)."""
    if isinstance(handoff, Handoff):
        ref = getattr(handoff, "_agent_ref", None)
        return ref() if ref is not None else None
    return handoff


def _tool_agent(tool: Any) -> Any:
    """The agent behind `agent.as_tool()` (a function tool that runs another agent)."""
    return getattr(tool, "_agent_instance", None) if getattr(tool, "_is_agent_tool",
                                                              False) else None


def reachable(agent: Agent[Any]) -> tuple[list[Agent[Any]], list[str]]:
    """Every agent a run of `agent` can reach (itself first, then handoffs and agents used as
    tools, transitively), and what cannot be followed (a handoff whose agent is unknown)."""
    seen: list[Agent[Any]] = []
    lost: list[str] = []
    pending: list[Any] = [agent]
    while pending:
        current = pending.pop(0)
        if any(current is known for known in seen):
            continue
        seen.append(current)
        for handoff in list(getattr(current, "handoffs", ())):
            target = _handoff_agent(handoff)
            if target is None:
                lost.append(f"handoff {getattr(handoff, 'agent_name', handoff)!r} (its agent "
                            "cannot be reached to gate its tools)")
            else:
                pending.append(target)
        pending.extend(target for tool in list(getattr(current, "tools", ()))
                       if (target := _tool_agent(tool)) is not None)
    return seen, lost


def ungated_tools(agent: Agent[Any]) -> list[Any]:
    """The tools of `agent` the gate cannot see run (anything but a function tool)."""
    return [tool for tool in list(agent.tools) if not isinstance(tool, FunctionTool)]


def _tool_label(tool: Any) -> str:
    name = getattr(tool, "name", None) or type(tool).__name__
    return f"{type(tool).__name__} {name!r}"


class OpenAIAgentsBinding:
    """Reads and changes one `agents.Agent` and every agent it can hand off to."""

    framework = FRAMEWORK

    def __init__(self, agent: Agent[Any]) -> None:
        self.agent = agent

    def _agents(self) -> list[Agent[Any]]:
        return reachable(self.agent)[0]

    def tools(self) -> list[str]:
        return sorted({tool.name for agent in self._agents() for tool in list(agent.tools)
                       if isinstance(tool, FunctionTool)})

    def delegates_to(self) -> list[str]:
        return sorted({agent.name for agent in self._agents()[1:]})

    def model(self) -> Any:
        return self.agent.model

    def set_model(self, model: Any) -> None:
        self.agent.model = model

    def remove_tools(self, names: set[str]) -> None:
        for agent in self._agents():
            # In place: the runner and the owner hold this very list.
            agent.tools[:] = [tool for tool in agent.tools
                              if not (isinstance(tool, FunctionTool) and tool.name in names)]

    def mcp_servers(self) -> list[dict[str, Any]]:
        return [describe_mcp_server(server) for agent in self._agents()
                for server in agent.mcp_servers]

    def unhookable(self) -> list[str]:
        agents, lost = reachable(self.agent)
        return [*lost, *(f"{_tool_label(tool)} of agent {agent.name!r} (the runner executes "
                         "it outside a function call)"
                         for agent in agents for tool in ungated_tools(agent))]

    def install_gate(self, governor: Governor) -> None:
        for agent in self._agents():
            gate_agent(agent, governor)


def gate_agent(agent: Agent[Any], governor: Governor) -> None:
    """Route `agent`'s tool calls (and its clones', and its sub-agents') through the gate."""
    if agent.__dict__.get("_agentgov_gated"):
        return
    get_all_tools = agent.get_all_tools
    clone = agent.clone

    async def gated_tools(run_context: Any) -> list[Any]:
        # Sub-agents added since the last look are gated before this turn can hand off.
        for sub_agent in reachable(agent)[0][1:]:
            gate_agent(sub_agent, governor)
        servers = _server_names(agent, governor)
        offered = []
        for tool in await get_all_tools(run_context):
            if isinstance(tool, FunctionTool):
                offered.append(_gated(tool, governor, servers))
            else:  # never offered, so never run
                governor.withhold(_tool_label(tool), "the gate cannot see it run")
        return offered

    def gated_clone(**kwargs: Any) -> Agent[Any]:
        copy = clone(**kwargs)
        gate_agent(copy, governor)
        return copy

    # Instance attributes: this agent only; the runner asks it every turn.
    object.__setattr__(agent, "get_all_tools", gated_tools)
    object.__setattr__(agent, "clone", gated_clone)
    object.__setattr__(agent, "_agentgov_gated", True)


def _server_names(agent: Agent[Any], governor: Governor) -> dict[str, str]:
    """The SDK names an MCP tool's server by its log name; the spec by its own name."""
    from agents.mcp.util import get_mcp_server_log_name

    return {get_mcp_server_log_name(server.name):
            governor.mcp_server_name(describe_mcp_server(server))
            for server in agent.mcp_servers}


def _gated(tool: FunctionTool, governor: Governor, servers: dict[str, str]) -> FunctionTool:
    """The tool with its call passing the gate first. An MCP tool (the SDK binds it to its
    server and MCP name) is approved by its server's entry in `mcp_servers`, not by `tools`."""
    invoke = tool.on_invoke_tool
    binding = getattr(tool, "_mcp_tool_binding", None)
    server = servers.get(binding[0], binding[0]) if binding else None
    name = binding[1] if binding else tool.name

    async def on_invoke_tool(context: Any, arguments: str) -> Any:
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            parsed = None
        try:
            if not isinstance(parsed, dict):
                # arguments the gate cannot read are arguments it cannot judge
                raise governor.refuse_unreadable(name, server)
            return await governor.agate(name, parsed, lambda: invoke(context, arguments),
                                        server=server)
        except CredentialsRefused as stopped:
            # the run stops: nothing governed runs once the token is refused
            raise RunStopped(str(stopped)) from None
        except ToolRefused as refused:
            return str(refused)  # the model reads why, and the run goes on

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


def govern(agent: Agent[Any], *, client: Client, name: str | None = None,
           **options: Any) -> Governor:
    """A Governor for `agent` (call `.start()`); options as `Governor`'s."""
    binding = OpenAIAgentsBinding(agent)
    return Governor(binding, client, name=name, **options)
