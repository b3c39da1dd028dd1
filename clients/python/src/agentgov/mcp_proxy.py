"""The governed MCP proxy: the agent connects here instead of to the MCP server.

It follows the agent's desired state and exposes, of the upstream server's tools, only those
approved with the fingerprint they have now; a call to any other tool is refused with an MCP
error. A call to a tool with an action rule (`approval_above`, `max`) asks the control plane for a
runtime decision first and waits for a human where the rule says so. Every forwarded call is
recorded as a behaviour event, and the upstream's tools (with their fingerprints) are reported as
the agent's observed `mcp_servers`, so a server that changes a tool after approval (the rug pull)
is drift on the next pass and the tool disappears from the agent at once.

Needs the `mcp` extra (`pip install 'agentgov-client[mcp]'`); built on FastMCP's proxy.
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from fastmcp import Client as McpClient
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import ToolError
from fastmcp.server import create_proxy
from fastmcp.server.middleware import Middleware

from agentgov.errors import AgentGovError, Forbidden, Unauthenticated
from agentgov.mcp_fingerprint import tool_fingerprint
from agentgov.mcp_identity import server_identity, target_identity

if TYPE_CHECKING:
    from fastmcp import FastMCP

    from agentgov.client import Client

log = logging.getLogger("agentgov.mcp_proxy")

HTTP_PREFIXES = ("http://", "https://")


@dataclass(frozen=True)
class Upstream:
    """The MCP server behind the proxy: a streamable-HTTP URL or a stdio command line."""

    target: str

    @property
    def transport(self) -> str:
        return "http" if self.target.startswith(HTTP_PREFIXES) else "stdio"

    def spec_entry(self, name: str) -> dict[str, str]:
        """How the manifest names this server: transport and url, or transport and command."""
        where = "url" if self.transport == "http" else "command"
        return {"name": name, "transport": self.transport, where: self.target}

    def connection(self, *, keep_alive: bool = True) -> str | StdioTransport:
        """What a FastMCP client or proxy connects with."""
        if self.transport == "http":
            return self.target
        command, *args = shlex.split(self.target)
        return StdioTransport(command, args, keep_alive=keep_alive)


def tool_face(name: str, description: str | None, input_schema: Mapping[str, Any] | None
              ) -> dict[str, str]:
    """A tool as observed state: its name, fingerprint and description."""
    return {"name": name, "fingerprint": tool_fingerprint(description, input_schema),
            "description": description or ""}


async def list_upstream_tools(upstream: Upstream) -> list[dict[str, str]]:
    """The upstream's tools now, each with its fingerprint, sorted by name."""
    async with McpClient(upstream.connection(keep_alive=False)) as session:
        tools = await session.list_tools()
    return sorted((tool_face(t.name, t.description, t.input_schema) for t in tools),
                  key=lambda tool: tool["name"])


@dataclass
class McpGovernor:
    """What the proxy knows: the approved tools (from the desired state) and what the upstream
    offers (from its last listing). Shared by the request handlers and the watcher thread."""

    client: Client
    agent: str
    server: str
    upstream: Upstream
    approved: dict[str, str] = field(default_factory=dict)  # tool name -> fingerprint
    actions: dict[str, Any] = field(default_factory=dict)
    offered: dict[str, dict[str, str]] = field(default_factory=dict)
    generation: int | None = None
    _reported: list[dict[str, str]] | None = None
    _listed_at: float = float("-inf")  # when the listing `offered` holds was started
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def follow(self) -> None:
        """Read the desired state (a 304 when unchanged) and take its approved tools."""
        desired = self.client.desired_state(self.agent)
        entry = next((s for s in desired.spec.get("mcp_servers", [])
                      if s["name"] == self.server), None)
        approved = {} if entry is None or not desired.running else {
            tool["name"]: tool["fingerprint"] for tool in entry["tools"]}
        with self._lock:
            if approved != self.approved:
                log.info("%s generation %s approves %s on %s", self.agent, desired.generation,
                         sorted(approved) or "no tools", self.server)
            self.approved, self.actions = approved, dict(desired.spec.get("actions", {}))
            self.generation = desired.generation

    def saw(self, tools: list[dict[str, str]], started: float | None = None) -> None:
        """Remember what the upstream offers and report it when it changed (a failed report
        is tried again with the next listing). A listing started before the one remembered is
        stale (the watcher's, overtaken by an agent's) and is dropped: it must not bring back
        a tool the upstream has since changed."""
        started = time.monotonic() if started is None else started
        with self._lock:
            if started < self._listed_at:
                return
            self._listed_at = started
            self.offered = {tool["name"]: tool for tool in tools}
            changed = tools != self._reported
        if changed:
            entry = {**self.upstream.spec_entry(self.server), "tools": tools}
            self.client.report_observed_part("mcp_servers", [entry], self.agent)
            with self._lock:
                self._reported = tools

    def refusal(self, name: str) -> str | None:
        """Why a call to `name` is refused now, or None if the tool is approved as offered."""
        with self._lock:
            approved, offered = self.approved.get(name), self.offered.get(name)
        if approved is None:
            return (f"MCP tool {name!r} is not approved for agent {self.agent} on server"
                    f" {self.server}; the governed proxy refuses it.")
        if offered is None:
            return f"MCP tool {name!r} is not offered by server {self.server} now."
        if offered["fingerprint"] != approved:
            return (f"MCP tool {name!r} on server {self.server} changed since it was approved"
                    " (its description or input schema differs); refused until a human"
                    " approves the new fingerprint or the server reverts it.")
        return None

    def exposes(self, name: str, description: str | None, schema: Mapping[str, Any] | None
                ) -> bool:
        """Whether the agent may see this tool as the upstream lists it now."""
        with self._lock:
            return self.approved.get(name) == tool_fingerprint(description, schema)

    def rule(self, name: str) -> Mapping[str, Any] | None:
        """The action rule (approval_above, max) for a tool of the same name, if any."""
        with self._lock:
            return self.actions.get(name)


class GovernanceMiddleware(Middleware):
    """Filters `tools/list` and guards `tools/call` by the governor's view."""

    def __init__(self, governor: McpGovernor, *, decision_wait: float = 300.0,
                 decision_poll: float = 0.5) -> None:
        self.governor = governor
        self.decision_wait = decision_wait
        self.decision_poll = decision_poll

    async def on_list_tools(self, context: Any, call_next: Any) -> Any:
        started = time.monotonic()
        tools = await call_next(context)
        seen = sorted((tool_face(t.name, t.description, t.parameters) for t in tools),
                      key=lambda tool: tool["name"])
        try:
            await anyio.to_thread.run_sync(self.governor.saw, seen, started)
        except AgentGovError as error:  # still filter: the control plane being down opens nothing
            log.warning("reporting %s's tools failed: %s", self.governor.server, error)
        return [t for t in tools if self.governor.exposes(t.name, t.description, t.parameters)]

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        governor = self.governor
        name, arguments = context.message.name, dict(context.message.arguments or {})
        if name not in governor.offered:  # called before any listing: look first
            started = time.monotonic()
            await anyio.to_thread.run_sync(governor.saw,
                                           await list_upstream_tools(governor.upstream), started)
        if (why := governor.refusal(name)) is not None:
            raise ToolError(why)
        decision = None
        if governor.rule(name) is not None:
            decision = await anyio.to_thread.run_sync(self._decide, name, arguments)
        result = await call_next(context)
        governor.client.tool_call(name, agent=governor.agent)
        if decision is not None:
            governor.client.action(name, amount=_amount(arguments), decision_id=decision.id,
                                   agent=governor.agent)
        return result

    def _decide(self, name: str, arguments: dict[str, Any]) -> Any:
        """Ask for a runtime decision and wait for a human where the rule needs one."""
        amount = _amount(arguments)
        decision = self.governor.client.decide(name, amount=amount, tool=name,
                                               wait=self.decision_wait, poll=self.decision_poll,
                                               agent=self.governor.agent)
        if not decision.allowed:
            said = "no human answered in time" if decision.pending else decision.outcome
            raise ToolError(f"MCP tool {name!r} with amount {amount} needs sign-off: decision"
                            f" {decision.id} says {said}; the call was not made.")
        return decision


def _amount(arguments: Mapping[str, Any]) -> float | None:
    value = arguments.get("amount")
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def watch_upstream(governor: McpGovernor, *, interval: float, stop: threading.Event) -> None:
    """Every `interval` seconds: follow the desired state and list the upstream, reporting its
    tools, so a changed tool is drift (and hidden) even while the agent lists nothing."""
    while not stop.is_set():
        try:
            governor.follow()
            started = time.monotonic()
            governor.saw(anyio.run(list_upstream_tools, governor.upstream), started)
        except (Unauthenticated, Forbidden):
            log.error("the control plane refused the proxy's token; stopping the watcher")
            raise
        except Exception as error:  # the upstream or the control plane may fail in any way
            log.warning("watching %s failed: %s; trying again in %ss", governor.server, error,
                        interval)
        stop.wait(interval)


def build_proxy(governor: McpGovernor, *, decision_wait: float = 300.0,
                decision_poll: float = 0.5) -> FastMCP:
    """The FastMCP proxy server with the governance middleware in front of the upstream."""
    proxy = create_proxy(governor.upstream.connection(), name=f"agentgov-{governor.server}")
    proxy.add_middleware(GovernanceMiddleware(governor, decision_wait=decision_wait,
                                              decision_poll=decision_poll))
    return proxy


def _reached_at(server: Mapping[str, Any], target: str) -> bool:
    """Whether an approved server is the upstream, by the one identity (a respelled URL or
    command line is the same server; one that cannot be read is none)."""
    try:
        return server_identity(server) == target_identity(target)
    except ValueError:
        return False


def serve(client: Client, *, agent: str, upstream: str, server: str | None = None,
          host: str = "127.0.0.1", port: int | None = None, interval: float = 5.0,
          decision_wait: float = 300.0) -> None:
    """Run the proxy until interrupted: on stdio (the agent starts it as its MCP server) or,
    with `port`, on streamable HTTP at http://host:port/mcp."""
    desired = client.desired_state(agent)
    servers = desired.spec.get("mcp_servers", [])
    source = Upstream(upstream)
    if server is None:
        named = [s["name"] for s in servers if _reached_at(s, source.target)]
        if len(named) != 1:
            raise ValueError(f"name the server with --server: {len(named)} approved servers of"
                             f" {agent} are reached at {upstream}")
        server = named[0]
    governor = McpGovernor(client, agent, server, source)
    governor.follow()
    stop = threading.Event()
    watcher = threading.Thread(target=watch_upstream, name="agentgov-mcp-watch", daemon=True,
                               kwargs={"governor": governor, "interval": interval, "stop": stop})
    watcher.start()
    proxy = build_proxy(governor, decision_wait=decision_wait)
    try:
        if port is None:
            proxy.run("stdio", show_banner=False)
        else:
            proxy.run("http", show_banner=False, host=host, port=port)
    finally:
        stop.set()
