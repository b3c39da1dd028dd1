"""LangGraph: govern a compiled tool-calling agent graph (extra `langgraph`), such as the one
`langgraph.prebuilt.create_react_agent` builds.

Two places hold what the agent can do, and both are read and changed: the graph's `ToolNode`
(the tools that can run) and the chat model binding its model node calls (the model, and the
tool schemas the model is offered). Every call the ToolNode runs passes the gate."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableBinding, RunnableSequence
from langgraph.prebuilt import ToolNode

from agentgov.adapters.governed import Governor, ToolRefused, describe_mcp_server
from agentgov.client import Client

FRAMEWORK = "langgraph"


def _tool_name(schema: Any) -> str | None:
    if isinstance(schema, dict):
        return (schema.get("function") or {}).get("name") or schema.get("name")
    return getattr(schema, "name", None)


class LangGraphBinding:
    """Reads and changes one compiled agent graph."""

    framework = FRAMEWORK

    def __init__(self, graph: Any, *, mcp_servers: list[Any] | None = None) -> None:
        self.graph = graph
        self.tool_nodes = [node.bound for node in graph.nodes.values()
                           if isinstance(node.bound, ToolNode)]
        if not self.tool_nodes:
            raise ValueError("the graph has no ToolNode: nothing to govern")
        self.chat_binding = self._find_chat_binding()
        # LangGraph has no MCP client of its own (langchain-mcp-adapters makes plain tools):
        # the owner names the servers the tools came from.
        self._mcp_servers = list(mcp_servers or [])

    def _find_chat_binding(self) -> RunnableBinding | None:
        """The model-with-tools the model node calls: create_react_agent keeps it in its
        node function's closure as `static_model` (a prompt | model.bind_tools(...))."""
        for node in self.graph.nodes.values():
            function = getattr(node.bound, "func", None)
            code, cells = getattr(function, "__code__", None), getattr(function, "__closure__",
                                                                       None)
            if code is None or not cells:
                continue
            values = dict(zip(code.co_freevars, (cell.cell_contents for cell in cells),
                              strict=False))
            runnable = values.get("static_model")
            steps = runnable.steps if isinstance(runnable, RunnableSequence) else [runnable]
            for step in steps:
                if isinstance(step, RunnableBinding) and "tools" in step.kwargs:
                    return step
        return None

    def tools(self) -> list[str]:
        names = {name for node in self.tool_nodes for name in list(node.tools_by_name)}
        if self.chat_binding is not None:
            names |= {_tool_name(schema) for schema in list(self.chat_binding.kwargs["tools"])
                      if _tool_name(schema)}
        return sorted(names)

    def model(self) -> Any:
        return self.chat_binding.bound if self.chat_binding is not None else None

    def set_model(self, model: Any) -> None:
        if self.chat_binding is not None:
            self.chat_binding.bound = model  # keeps the bound tool schemas

    def remove_tools(self, names: set[str]) -> None:
        for node in self.tool_nodes:
            for name in names:
                node.tools_by_name.pop(name, None)
        if self.chat_binding is not None:
            schemas = self.chat_binding.kwargs["tools"]
            schemas[:] = [schema for schema in schemas if _tool_name(schema) not in names]

    def mcp_servers(self) -> list[dict[str, Any]]:
        return [describe_mcp_server(server) for server in self._mcp_servers]

    def install_gate(self, governor: Governor) -> None:
        for node in self.tool_nodes:
            if getattr(node, "_agentgov_gated", False):
                continue
            node._wrap_tool_call = _sync_gate(governor)
            node._awrap_tool_call = _async_gate(governor)
            node._agentgov_gated = True


def _refusal(request: Any, refused: ToolRefused) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(content=str(refused), tool_call_id=call["id"], name=call["name"],
                       status="error")


def _sync_gate(governor: Governor) -> Any:
    def wrap(request: Any, execute: Any) -> Any:
        call = request.tool_call
        try:
            return governor.gate(call["name"], call.get("args") or {}, lambda: execute(request))
        except ToolRefused as refused:
            return _refusal(request, refused)

    return wrap


def _async_gate(governor: Governor) -> Any:
    async def wrap(request: Any, execute: Any) -> Any:
        call = request.tool_call
        try:
            return await governor.agate(call["name"], call.get("args") or {},
                                        lambda: execute(request))
        except ToolRefused as refused:
            return _refusal(request, refused)

    return wrap


def govern(graph: Any, *, client: Client, name: str | None = None,
           mcp_servers: list[Any] | None = None, **options: Any) -> Governor:
    """A Governor for the compiled agent `graph` (call `.start()`); options as `Governor`'s."""
    binding = LangGraphBinding(graph, mcp_servers=mcp_servers)
    return Governor(binding, client, name=name, **options)
