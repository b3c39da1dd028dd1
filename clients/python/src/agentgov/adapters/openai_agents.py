"""OpenAI Agents SDK: govern an `agents.Agent` (extra `openai-agents`).

Tools are read from `agent.tools` (the list the owner may change at runtime), MCP servers from
`agent.mcp_servers`; every function tool the runner gets for a turn (the agent's and its MCP
servers') is wrapped so its call passes the gate."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from agents import Agent, FunctionTool

from agentgov.adapters.governed import Governor, ToolRefused, describe_mcp_server
from agentgov.client import Client

FRAMEWORK = "openai-agents"


class OpenAIAgentsBinding:
    """Reads and changes one `agents.Agent`."""

    framework = FRAMEWORK

    def __init__(self, agent: Agent[Any]) -> None:
        self.agent = agent

    def tools(self) -> list[str]:
        return [tool.name for tool in list(self.agent.tools)]

    def model(self) -> Any:
        return self.agent.model

    def set_model(self, model: Any) -> None:
        self.agent.model = model

    def remove_tools(self, names: set[str]) -> None:
        # In place: the runner and the owner hold this very list.
        self.agent.tools[:] = [tool for tool in self.agent.tools if tool.name not in names]

    def mcp_servers(self) -> list[dict[str, Any]]:
        return [describe_mcp_server(server) for server in self.agent.mcp_servers]

    def install_gate(self, governor: Governor) -> None:
        agent = self.agent
        if getattr(agent, "_agentgov_gated", False):
            return
        get_all_tools = agent.get_all_tools

        async def gated_tools(run_context: Any) -> list[Any]:
            servers = _server_names(agent)
            return [_gated(tool, governor, servers) if isinstance(tool, FunctionTool) else tool
                    for tool in await get_all_tools(run_context)]

        # An instance attribute: this agent only, and the runner asks it every turn.
        object.__setattr__(agent, "get_all_tools", gated_tools)
        object.__setattr__(agent, "_agentgov_gated", True)


def _server_names(agent: Agent[Any]) -> dict[str, str]:
    """The SDK names an MCP tool's server by its log name; the spec by the name we report."""
    from agents.mcp.util import get_mcp_server_log_name

    return {get_mcp_server_log_name(server.name): describe_mcp_server(server)["name"]
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
            parsed = {}
        parsed = parsed if isinstance(parsed, dict) else {}
        try:
            return await governor.agate(name, parsed, lambda: invoke(context, arguments),
                                        server=server)
        except ToolRefused as refused:
            return str(refused)  # the model reads why, and the run goes on

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


def govern(agent: Agent[Any], *, client: Client, name: str | None = None,
           **options: Any) -> Governor:
    """A Governor for `agent` (call `.start()`); options as `Governor`'s."""
    binding = OpenAIAgentsBinding(agent)
    return Governor(binding, client, name=name, **options)
