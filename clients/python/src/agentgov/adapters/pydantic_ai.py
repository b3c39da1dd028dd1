"""Pydantic AI: govern a `pydantic_ai.Agent` (extra `pydantic-ai`).

The gate sits where every run gets its tools: the agent's `_get_toolset`, which combines the
agent's own tools, every toolset given to the constructor or to the run (`toolsets=[...]`),
capability toolsets and MCP toolsets, however they are wrapped (`.prefixed()`, `.filtered()`,
`.renamed()`, combined, approval-required). Each leaf toolset of that tree (the one that really
runs the tool) is wrapped, for that run only, in a `GatedToolset`, so a tool is gated however it
was attached and the owner's toolset objects are not changed. A tool is named by its leaf's
name (the name the function or the MCP server has); an MCP toolset's tools are approved by its
server's entry in the spec, found by name or by where the server is (its URL or command).

Observed: the tools of every function toolset the agent holds, the MCP servers it holds, the
model. Refused at `start()`: native (provider-run) tools, which run at the model provider
where no gate can see them; and refused for the run, before the model is called, when a run
brings one of its own (`capabilities=` on the run, `override(native_tools=...)`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.native_tools._tool_search import ToolSearchTool
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset

from agentgov.adapters.governed import (
    CredentialsRefused,
    Governor,
    ToolRefused,
    describe_mcp_server,
)
from agentgov.client import Client

FRAMEWORK = "pydantic-ai"


def is_mcp(toolset: Any) -> bool:
    """An MCP client toolset (pydantic-ai's MCPToolset or a durable wrapper's copy of it)."""
    return "mcp" in type(toolset).__name__.lower()


def leaves(toolsets: Any) -> list[AbstractToolset[Any]]:
    """The toolsets that list and call their own tools, under every wrapper and combination."""
    found: list[AbstractToolset[Any]] = []
    for toolset in toolsets:
        toolset.apply(found.append)
    return found


@dataclass
class GatedToolset(WrapperToolset[Any]):
    """One leaf toolset of one run, with every call passing the governor's gate first."""

    governor: Governor | None = None
    server: dict[str, Any] | None = None  # {name, url | command} when the leaf is MCP

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
        governor = self.governor
        if governor is None or tool.tool_def.kind == "output":
            # the agent's answer to its caller, not a tool acting on anything
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        server = governor.mcp_server_name(self.server) if self.server is not None else None
        try:
            return await governor.agate(
                name, tool_args, lambda: self.wrapped.call_tool(name, tool_args, ctx, tool),
                server=server)
        except CredentialsRefused:
            raise  # the run stops: nothing governed runs once the token is refused
        except ToolRefused as refused:
            return str(refused)  # the model reads why, and the run goes on


def provider_run(native_tools: Any) -> list[str]:
    """The native tools that act at the model provider, out of the gate's reach: all but tool
    search (which only finds deferred tools, each of which still passes the gate); a dynamic
    one (a function deciding per run) counts, since the gate cannot know what it will be."""
    return [f"native tool {_native_name(tool)} (run by the model provider, out of the gate's "
            "reach)" for tool in native_tools or () if not isinstance(tool, ToolSearchTool)]


def _native_name(tool: Any) -> str:
    return getattr(tool, "kind", None) or getattr(tool, "__name__", None) or type(tool).__name__


class PydanticAIBinding:
    """Reads and changes one `pydantic_ai.Agent`."""

    framework = FRAMEWORK

    def __init__(self, agent: Agent[Any, Any]) -> None:
        self.agent = agent

    def _leaves(self) -> list[AbstractToolset[Any]]:
        return leaves(self.agent.toolsets)

    def _function_toolsets(self) -> list[FunctionToolset[Any]]:
        return [leaf for leaf in self._leaves() if isinstance(leaf, FunctionToolset)]

    def tools(self) -> list[str]:
        return sorted({name for leaf in self._function_toolsets() for name in list(leaf.tools)})

    def model(self) -> Any:
        return self.agent.model

    def set_model(self, model: Any) -> None:
        self.agent.model = model

    def remove_tools(self, names: set[str]) -> None:
        for leaf in self._function_toolsets():
            for name in names:
                leaf.tools.pop(name, None)

    def mcp_servers(self) -> list[dict[str, Any]]:
        return [describe_mcp_server(leaf) for leaf in self._leaves() if is_mcp(leaf)]

    def unhookable(self) -> list[str]:
        return provider_run(getattr(self.agent, "_cap_native_tools", ()))

    def install_gate(self, governor: Governor) -> None:
        agent = self.agent
        if agent.__dict__.get("_agentgov_gated"):
            return
        get_toolset = agent._get_toolset

        def gated_toolset(*args: Any, **kwargs: Any) -> AbstractToolset[Any]:
            # Every run (run, run_sync, iter, run_stream) builds its toolset here.
            return get_toolset(*args, **kwargs).visit_and_replace(
                lambda leaf: GatedToolset(leaf, governor=governor,
                                          server=describe_mcp_server(leaf) if is_mcp(leaf)
                                          else None))

        resolve = agent._resolve_run_capabilities

        async def refusing_native(*args: Any, **kwargs: Any) -> Any:
            # Every run resolves its capabilities here, with the run's own and an override's
            # native tools folded in: one the gate cannot see stops the run before the model.
            resolved = await resolve(*args, **kwargs)
            if found := provider_run(resolved.native_tools):
                raise ToolRefused(f"refused by governance: this run brings {found[0]}")
            return resolved

        agent._get_toolset = gated_toolset  # type: ignore[method-assign]
        agent._resolve_run_capabilities = refusing_native  # type: ignore[method-assign]
        agent._agentgov_gated = True  # type: ignore[attr-defined]


def govern(agent: Agent[Any, Any], *, client: Client, name: str | None = None,
           **options: Any) -> Governor:
    """A Governor for `agent` (call `.start()`); options as `Governor`'s."""
    binding = PydanticAIBinding(agent)
    return Governor(binding, client, name=name, **options)
