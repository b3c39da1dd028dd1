"""LangGraph: govern a compiled graph (extra `langgraph`): a `create_react_agent` graph, any
graph with `ToolNode`s (in it or in its subgraphs), or custom nodes that call LangChain tools.

Two gates, one per way a tool runs. Every `ToolNode` (the graph's and its subgraphs') passes
each call through the gate and answers a refusal as the tool's message to the model. Every
other LangChain tool run inside the graph (a custom node calling `tool.invoke`, a subgraph's
node) passes a callback installed in the graph's own config, which every run of the graph and
of its subgraphs inherits: the gate runs in `on_tool_start`, before the tool, and a refusal
is raised (ToolRefused) out of the node. A plain Python function a node calls is not a tool
call and is not seen.

Observed: the tools of every ToolNode, the tool schemas the model is offered, the tools
custom nodes have called, and the model."""

from __future__ import annotations

import contextvars
import json
import threading
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableBinding, RunnableSequence
from langgraph.prebuilt import ToolNode

from agentgov.adapters.governed import (
    CredentialsRefused,
    Governor,
    ToolRefused,
    describe_mcp_server,
)
from agentgov.client import Client
from agentgov.responses import Decision

# Set while a ToolNode's gate runs a call it already checked, so the callback gate below
# does not ask again (a second decision for one refund).
_CHECKED: contextvars.ContextVar[bool] = contextvars.ContextVar("agentgov_checked",
                                                                default=False)

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
        self.graphs = [graph, *(sub for _, sub in graph.get_subgraphs(recurse=True))]
        self.tool_nodes = [node.bound for each in self.graphs for node in each.nodes.values()
                           if isinstance(node.bound, ToolNode)]
        self.chat_binding = self._find_chat_binding()
        self.callback_gate: CallbackGate | None = None
        # LangGraph has no MCP client of its own (langchain-mcp-adapters makes plain tools):
        # the owner names the servers the tools came from.
        self._mcp_servers = list(mcp_servers or [])

    def _find_chat_binding(self) -> RunnableBinding | None:
        """The model-with-tools the model node calls: create_react_agent keeps it in its
        node function's closure as `static_model` (a prompt | model.bind_tools(...))."""
        for node in (node for each in self.graphs for node in each.nodes.values()):
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
        if self.callback_gate is not None:
            names |= self.callback_gate.seen
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
        if self.callback_gate is None:
            self.callback_gate = CallbackGate(governor)
            # In the compiled graph's own config: merged into every invoke/stream of it, and
            # inherited by every runnable (tool, subgraph) its nodes run.
            config = dict(self.graph.config or {})
            callbacks = config.get("callbacks")
            if callbacks is None:
                config["callbacks"] = [self.callback_gate]
            elif isinstance(callbacks, list):
                config["callbacks"] = [*callbacks, self.callback_gate]
            else:  # a callback manager
                callbacks.add_handler(self.callback_gate, inherit=True)
            self.graph.config = config


class CallbackGate(BaseCallbackHandler):
    """The gate for tools run outside a ToolNode: it checks in `on_tool_start` (raising the
    refusal, which stops the tool) and records in `on_tool_end`."""

    raise_error = True  # a refusal must stop the tool, not be logged
    run_inline = True  # in the tool's own context, where a ToolNode's check is visible

    def __init__(self, governor: Governor) -> None:
        self.governor = governor
        self.seen: set[str] = set()
        self._running: dict[UUID, tuple[str, dict[str, Any], Decision | None]] = {}
        self._lock = threading.Lock()

    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *,
                      run_id: UUID, inputs: dict[str, Any] | None = None,
                      **kwargs: Any) -> None:
        if _CHECKED.get():
            return
        name = str((serialized or {}).get("name") or kwargs.get("name") or "")
        arguments = inputs if isinstance(inputs, dict) else _arguments(input_str)
        self.seen.add(self.governor.governance_name(name))
        decision = self.governor.check(name, arguments)  # raises the refusal
        with self._lock:
            self._running[run_id] = (name, arguments, decision)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            started = self._running.pop(run_id, None)
        if started is not None:
            self.governor.record(*started)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._running.pop(run_id, None)


def _arguments(text: str) -> dict[str, Any]:
    """A tool's input given as a string: its JSON object, else the one string argument."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {"input": text}
    return value if isinstance(value, dict) else {"input": value}


def _refusal(request: Any, refused: ToolRefused) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(content=str(refused), tool_call_id=call["id"], name=call["name"],
                       status="error")


def _checked(execute: Any, request: Any) -> Any:
    token = _CHECKED.set(True)
    try:
        return execute(request)
    finally:
        _CHECKED.reset(token)


def _sync_gate(governor: Governor) -> Any:
    def wrap(request: Any, execute: Any) -> Any:
        call = request.tool_call
        try:
            return governor.gate(call["name"], call.get("args") or {},
                                 lambda: _checked(execute, request))
        except CredentialsRefused:
            raise  # the run stops: nothing governed runs once the token is refused
        except ToolRefused as refused:
            return _refusal(request, refused)

    return wrap


def _async_gate(governor: Governor) -> Any:
    async def wrap(request: Any, execute: Any) -> Any:
        call = request.tool_call

        async def run() -> Any:
            token = _CHECKED.set(True)
            try:
                return await execute(request)
            finally:
                _CHECKED.reset(token)

        try:
            return await governor.agate(call["name"], call.get("args") or {}, run)
        except CredentialsRefused:
            raise  # the run stops: nothing governed runs once the token is refused
        except ToolRefused as refused:
            return _refusal(request, refused)

    return wrap


def govern(graph: Any, *, client: Client, name: str | None = None,
           mcp_servers: list[Any] | None = None, **options: Any) -> Governor:
    """A Governor for the compiled agent `graph` (call `.start()`); options as `Governor`'s."""
    binding = LangGraphBinding(graph, mcp_servers=mcp_servers)
    return Governor(binding, client, name=name, **options)
