"""Pydantic AI: govern a `pydantic_ai.Agent` (extra `pydantic-ai`).

Tools are read from the agent's function toolset (including tools added later with
`@agent.tool`), MCP servers from its toolsets; every toolset's `call_tool` passes the gate."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent

from agentgov.adapters.governed import Governor, ToolRefused, describe_mcp_server
from agentgov.client import Client

FRAMEWORK = "pydantic-ai"


class PydanticAIBinding:
    """Reads and changes one `pydantic_ai.Agent`."""

    framework = FRAMEWORK

    def __init__(self, agent: Agent[Any, Any]) -> None:
        self.agent = agent

    def _function_toolset(self) -> Any:
        # The agent's own tools (constructor, @agent.tool, @agent.tool_plain) live here.
        return self.agent._function_toolset

    def _mcp_toolsets(self) -> list[Any]:
        return [toolset for toolset in self.agent.toolsets
                if "mcp" in type(toolset).__name__.lower()]

    def tools(self) -> list[str]:
        return list(self._function_toolset().tools)

    def model(self) -> Any:
        return self.agent.model

    def set_model(self, model: Any) -> None:
        self.agent.model = model

    def remove_tools(self, names: set[str]) -> None:
        tools = self._function_toolset().tools
        for name in names:
            tools.pop(name, None)

    def mcp_servers(self) -> list[dict[str, Any]]:
        return [describe_mcp_server(toolset) for toolset in self._mcp_toolsets()]

    def install_gate(self, governor: Governor) -> None:
        mcp = self._mcp_toolsets()
        for toolset in [self._function_toolset(), *mcp]:
            if getattr(toolset, "_agentgov_gated", False):
                continue
            call_tool = toolset.call_tool
            # an MCP tool is approved by its server's entry in the spec, not by `tools`
            server = describe_mcp_server(toolset)["name"] if toolset in mcp else None

            async def gated(name: str, tool_args: dict[str, Any], ctx: Any, tool: Any,
                            call_tool: Any = call_tool, server: str | None = server) -> Any:
                try:
                    return await governor.agate(
                        name, tool_args, lambda: call_tool(name, tool_args, ctx, tool),
                        server=server)
                except ToolRefused as refused:
                    return str(refused)  # the model reads why, and the run goes on

            toolset.call_tool = gated
            toolset._agentgov_gated = True


def govern(agent: Agent[Any, Any], *, client: Client, name: str | None = None,
           **options: Any) -> Governor:
    """A Governor for `agent` (call `.start()`); options as `Governor`'s."""
    binding = PydanticAIBinding(agent)
    return Governor(binding, client, name=name, **options)
