"""The governed MCP proxy: the agent connects here instead of to the MCP server.

It follows the agent's desired state and governs every MCP primitive the upstream offers: of its
tools, prompts, resources and resource templates it lists and serves only those approved (in the
server's `mcp_servers` entry) with the fingerprint they have now, and not those an open finding
holds back; anything else is refused with an MCP error that says why. A tool call's arguments
are checked against the approved input schema before they are forwarded (the upstream's own
validation may be laxer), and a tool with an action rule (`approval_above`, `max`) asks the
control plane for a runtime decision first, waiting for a human where the rule says so.
Sampling and elicitation requests from the server are refused unless the server's entry allows
them. Every forwarded call is recorded as a behaviour event, and what the upstream offers (with
fingerprints) is reported as the agent's observed `mcp_servers`, when it changes and every
`report_every` seconds, so a rug pull is drift on the next pass.

Losing the control plane stops governed calls: a 401 or 403 at once; an unreachable control
plane (refused connection, timeout, 5xx) after `fail_open_seconds` since the last successful
contact, except the tools named read-only, which keep running while it is unreachable.

Needs the `mcp` extra (`pip install 'agentgov-client[mcp]'`); built on FastMCP's proxy.
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from fastmcp import Client as McpClient
from fastmcp.client.elicitation import create_elicitation_callback
from fastmcp.client.sampling import create_sampling_callback
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import PromptError, ResourceError, ToolError
from fastmcp.server import create_proxy
from fastmcp.server.middleware import Middleware
from fastmcp.server.providers.proxy import (
    ProxyClient,
    _make_restoring_handler,
    default_proxy_elicitation_handler,
    default_proxy_sampling_handler,
)
from mcp import MCPError

from agentgov.errors import AgentGovError, ApiError, Forbidden, Unauthenticated
from agentgov.mcp_arguments import argument_problems
from agentgov.mcp_fingerprint import (  # noqa: F401 (FINGERPRINT_VERSION, version: mcp_cli)
    FINGERPRINT_VERSION,
    PRIMITIVES,
    matches,
    prompt_fingerprint,
    resource_fingerprint,
    tool_fingerprint,
    version,
)
from agentgov.mcp_identity import server_identity, target_identity

if TYPE_CHECKING:
    from fastmcp import FastMCP

    from agentgov.client import Client

log = logging.getLogger("agentgov.mcp_proxy")

HTTP_PREFIXES = ("http://", "https://")
NOUNS = {"tools": "tool", "prompts": "prompt", "resources": "resource",
         "resource_templates": "resource template"}
ERRORS: dict[str, type[Exception]] = {"tools": ToolError, "prompts": PromptError,
                                      "resources": ResourceError,
                                      "resource_templates": ResourceError}


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


# --- faces: what a primitive tells the model or the client -----------------------------------


def _get(item: Any, *names: str) -> Any:
    for name in names:
        value = item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)
        if value is not None:
            return value
    return None


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True, by_alias=True)
    return value


def face(primitive: str, item: Any) -> dict[str, Any]:
    """One listed primitive (an MCP SDK object) as the proxy keeps it: its identity, every
    field its fingerprint covers, and the fingerprint (version 2)."""
    title, description = _get(item, "title"), _get(item, "description") or ""
    if primitive == "tools":
        parts = {"name": item.name, "title": title, "description": description,
                 "annotations": _plain(_get(item, "annotations")),
                 "input_schema": _plain(_get(item, "input_schema", "inputSchema")) or {},
                 "output_schema": _plain(_get(item, "output_schema", "outputSchema"))}
        return {**parts, "fingerprint": tool_fingerprint(**parts)}
    if primitive == "prompts":
        arguments = [_plain(argument) for argument in _get(item, "arguments") or []]
        return {"name": item.name, "title": title, "description": description,
                "arguments": arguments,
                "fingerprint": prompt_fingerprint(item.name, title=title, description=description,
                                                  arguments=arguments)}
    template = primitive == "resource_templates"
    key = PRIMITIVES[primitive]
    uri = str(_get(item, key, "uriTemplate") if template else item.uri)
    parts = {"name": _get(item, "name"), "title": title, "description": description,
             "mime_type": _get(item, "mime_type", "mimeType"),
             "annotations": _plain(_get(item, "annotations"))}
    return {key: uri, **parts,
            "fingerprint": resource_fingerprint(uri, template=template, **parts)}


def reported(primitive: str, seen: Mapping[str, Any], pinned: str | None) -> dict[str, str]:
    """A face as observed state: its identity, fingerprint and description. A tool its
    version-1 pin still approves is reported with that pin, so upgrading the proxy is not drift;
    everything else is reported with its version-2 fingerprint."""
    key = PRIMITIVES[primitive]
    fingerprint = pinned if pinned is not None and pinned != seen["fingerprint"] and matches(
        pinned, seen) else seen["fingerprint"]
    return {key: seen[key], "fingerprint": fingerprint, "description": seen["description"]}


async def _listing(session: McpClient, primitive: str) -> list[Any]:
    try:
        return list(await getattr(session, f"list_{primitive}")())
    except MCPError as error:  # a server without this capability offers none of it
        if "not found" in str(error).lower() or "not supported" in str(error).lower():
            return []
        raise


async def list_upstream(upstream: Upstream) -> dict[str, list[dict[str, Any]]]:
    """Every primitive the upstream offers now, as faces sorted by identity."""
    async with McpClient(upstream.connection(keep_alive=False)) as session:
        listed = {primitive: await _listing(session, primitive) for primitive in PRIMITIVES}
    return {primitive: sorted((face(primitive, item) for item in items),
                              key=lambda seen, k=PRIMITIVES[primitive]: seen[k])
            for primitive, items in listed.items()}


# --- the control plane link: fail closed, with a stated grace --------------------------------


@dataclass
class ControlPlaneLink:
    """How the proxy stands with the control plane. A 401 or 403 stops every governed call
    until a later contact succeeds; an unreachable control plane (refused connection, timeout,
    5xx) is tolerated for `fail_open_seconds` after the last successful contact, and past that
    only the `read_only_tools` keep running."""

    fail_open_seconds: float = 0.0
    read_only_tools: frozenset[str] = frozenset()
    last_ok: float = field(default_factory=time.monotonic)
    down_since: float | None = None
    down_reason: str = ""
    refused: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def succeeded(self) -> None:
        with self._lock:
            self.last_ok, self.down_since, self.down_reason, self.refused = (
                time.monotonic(), None, "", "")

    def failed(self, error: AgentGovError) -> None:
        """Record a failed contact: a refused token, or an unreachable control plane (an
        answer that is neither, a 404 or a 422, says the control plane is there)."""
        with self._lock:
            if isinstance(error, Unauthenticated | Forbidden):
                self.refused = f"{error.status} {error.code}: {error.message}"
            elif not isinstance(error, ApiError) or error.status >= 500:
                self.down_since = self.down_since or time.monotonic()
                self.down_reason = str(error)

    def refusal(self, tool: str | None = None) -> str | None:
        """Why a governed call (of `tool`, if a tool) is refused now, or None."""
        with self._lock:
            if self.refused:
                return (f"the control plane refused this proxy's token ({self.refused});"
                        " every governed MCP call is stopped until it accepts it again")
            if self.down_since is None:
                return None
            away = time.monotonic() - self.last_ok
            if away <= self.fail_open_seconds or tool in self.read_only_tools:
                return None
            return (f"the control plane has been unreachable for {away:.0f} s"
                    f" ({self.down_reason}), past the {self.fail_open_seconds:g} s grace"
                    " (fail_open_seconds); only read-only tools named with --read-only-tool"
                    " keep running")


# --- what the proxy knows ---------------------------------------------------------------------


def _empty() -> dict[str, dict[str, Any]]:
    return {primitive: {} for primitive in PRIMITIVES}


@dataclass
class McpGovernor:
    """What the proxy knows: the approved primitives (from the desired state), those held back
    by open findings, and what the upstream offers (from its last listing). Shared by the
    request handlers and the watcher thread."""

    client: Client
    agent: str
    server: str
    upstream: Upstream
    link: ControlPlaneLink = field(default_factory=ControlPlaneLink)
    report_every: float = 60.0
    approved: dict[str, dict[str, str]] = field(default_factory=_empty)  # key -> fingerprint
    held: set[tuple[str, str]] = field(default_factory=set)
    allows: frozenset[str] = frozenset()  # "sampling", "elicitation"
    actions: dict[str, Any] = field(default_factory=dict)
    offered: dict[str, dict[str, dict[str, Any]]] = field(default_factory=_empty)
    listed: bool = False
    generation: int | None = None
    _reported: list[Any] | None = None
    _reported_at: float = float("-inf")
    _listed_at: float = float("-inf")  # when the listing `offered` holds was started
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def contact(self, call: Callable[[], Any]) -> Any:
        """Call the control plane, keeping the link's account of how it answered."""
        try:
            result = call()
        except AgentGovError as error:
            self.link.failed(error)
            raise
        self.link.succeeded()
        return result

    def follow(self, *, retry: bool = True) -> None:
        """Read the desired state (a 304 when unchanged): the approved primitives of this
        server, what open findings hold back, and whether sampling and elicitation are allowed."""
        desired = self.contact(lambda: self.client.desired_state(self.agent, retry=retry))
        entry = next((s for s in desired.spec.get("mcp_servers", [])
                      if s["name"] == self.server), None)
        approved = _empty()
        if entry is not None and desired.running:
            for primitive, key in PRIMITIVES.items():
                approved[primitive] = {item[key]: item["fingerprint"]
                                       for item in entry.get(primitive, [])}
        held = {(h["primitive"], h["name"]) for h in desired.held if h["server"] == self.server}
        allows = frozenset(kind for kind in ("sampling", "elicitation")
                           if entry is not None and entry.get(f"allow_{kind}") is True)
        with self._lock:
            if approved != self.approved or held != self.held:
                log.info("%s generation %s approves %s on %s; held by open findings: %s",
                         self.agent, desired.generation,
                         {p: sorted(a) for p, a in approved.items() if a} or "nothing",
                         self.server, sorted(held) or "nothing")
            self.approved, self.held, self.allows = approved, held, allows
            self.actions = dict(desired.spec.get("actions", {}))
            self.generation = desired.generation

    def saw(self, listing: Mapping[str, list[dict[str, Any]]],
            started: float | None = None, *, primitives: Iterable[str] = PRIMITIVES) -> None:
        """Remember what the upstream offers of `primitives` and report it when it changed or
        `report_every` seconds passed (a failed report is tried again with the next listing).
        A listing started before the one remembered is stale (the watcher's, overtaken by an
        agent's) and is dropped: it must not bring back something the upstream has changed."""
        started = time.monotonic() if started is None else started
        with self._lock:
            if started < self._listed_at:
                return
            self._listed_at = started
            for primitive in primitives:
                self.offered[primitive] = {
                    seen[PRIMITIVES[primitive]]: seen for seen in listing.get(primitive, [])}
            self.listed = self.listed or set(primitives) == set(PRIMITIVES)
            entry = self._observed_entry()
            due = (entry != self._reported
                   or time.monotonic() - self._reported_at >= self.report_every)
        if due and self.listed:
            self.contact(lambda: self.client.report_observed_part("mcp_servers", [entry],
                                                                  self.agent))
            with self._lock:
                self._reported, self._reported_at = entry, time.monotonic()

    def _observed_entry(self) -> dict[str, Any]:
        """This server as observed state: where it is and everything it offers."""
        entry: dict[str, Any] = self.upstream.spec_entry(self.server)
        for primitive in PRIMITIVES:
            entry[primitive] = [reported(primitive, seen, self.approved[primitive].get(name))
                                for name, seen in sorted(self.offered[primitive].items())]
            # an empty listing is said only where it matters (something of it is approved),
            # so a server offering no prompts reports as it did before prompts were governed
            if not entry[primitive] and primitive != "tools" and not self.approved[primitive]:
                del entry[primitive]
        return entry

    def refusal(self, primitive: str, name: str) -> tuple[str | None, dict[str, Any] | None]:
        """Why `name` is refused now (or None) and, when it is not, its approved face."""
        noun = f"MCP {NOUNS[primitive]} {name!r}"
        with self._lock:
            pinned = self.approved[primitive].get(name)
            offered = self.offered[primitive].get(name)
            held = (primitive, name) in self.held
        if pinned is None:
            return (f"{noun} is not approved for agent {self.agent} on server {self.server};"
                    " the governed proxy refuses it."), None
        if offered is None:
            return f"{noun} is not offered by server {self.server} now.", None
        if not matches(pinned, offered):
            return (f"{noun} on server {self.server} changed since it was approved (its"
                    " fingerprint covers every field the model or client reads); refused until"
                    " a human approves the new fingerprint or the server reverts it."), None
        if held:
            return (f"{noun} on server {self.server} is held back by an open finding: the"
                    " server offers the approved version again, but an approver has not"
                    " closed the finding yet."), None
        return None, offered

    def exposes(self, primitive: str, item: Any) -> bool:
        """Whether the agent may see this primitive as the upstream lists it now."""
        seen = face(primitive, item)
        name = seen[PRIMITIVES[primitive]]
        with self._lock:
            pinned = self.approved[primitive].get(name)
            held = (primitive, name) in self.held
        return pinned is not None and not held and matches(pinned, seen)

    def readable(self, uri: str) -> str | None:
        """Why reading `uri` is refused, or None: it must be an approved resource as offered
        now, or (when the server lists no resource of that URI) match an approved resource
        template as offered now."""
        why, _ = self.refusal("resources", uri)
        if why is None:
            return None
        with self._lock:
            templates = list(self.approved["resource_templates"])
            listed = uri in self.offered["resources"] or uri in self.approved["resources"]
        if listed:  # a resource of its own is judged as one: a template does not widen it
            return why
        for template in templates:
            if _matches_template(template, uri) and self.refusal("resource_templates",
                                                                 template)[0] is None:
                return None
        return why

    def rule(self, name: str) -> Mapping[str, Any] | None:
        """The action rule (approval_above, max) for a tool of the same name, if any."""
        with self._lock:
            return self.actions.get(name)

    def allowed(self, kind: str) -> bool:
        with self._lock:
            return kind in self.allows


def _matches_template(template: str, uri: str) -> bool:
    from fastmcp.resources.template import match_uri_template

    return match_uri_template(uri, template) is not None


# --- the middleware ---------------------------------------------------------------------------


class GovernanceMiddleware(Middleware):
    """Filters every listing and guards every call (tools, prompts, resource reads) by the
    governor's view and the control plane link."""

    def __init__(self, governor: McpGovernor, *, decision_wait: float = 300.0,
                 decision_poll: float = 0.5) -> None:
        self.governor = governor
        self.decision_wait = decision_wait
        self.decision_poll = decision_poll

    async def _listed(self, primitive: str, items: list[Any], started: float) -> list[Any]:
        """Remember and report the listing, hear the control plane (what is approved and held
        now), and keep what the agent may see."""
        listing = {primitive: [face(primitive, _as_mcp(primitive, item)) for item in items]}

        def look() -> None:
            try:
                self.governor.follow(retry=False)
            finally:
                self.governor.saw(listing, started, primitives=[primitive])

        try:
            await anyio.to_thread.run_sync(look)
        except AgentGovError as error:  # still filter: the control plane being down opens nothing
            log.warning("listing %s's %s: the control plane failed: %s", self.governor.server,
                        primitive, error)
        if self.governor.link.refusal() is not None:
            return []
        return [item for item in items
                if self.governor.exposes(primitive, _as_mcp(primitive, item))]

    async def on_list_tools(self, context: Any, call_next: Any) -> Any:
        started = time.monotonic()
        return await self._listed("tools", list(await call_next(context)), started)

    async def on_list_prompts(self, context: Any, call_next: Any) -> Any:
        started = time.monotonic()
        return await self._listed("prompts", list(await call_next(context)), started)

    async def on_list_resources(self, context: Any, call_next: Any) -> Any:
        started = time.monotonic()
        return await self._listed("resources", list(await call_next(context)), started)

    async def on_list_resource_templates(self, context: Any, call_next: Any) -> Any:
        started = time.monotonic()
        return await self._listed("resource_templates", list(await call_next(context)),
                                  started)

    async def _check_in(self, primitive: str, name: str) -> None:
        """Before a governed call: hear the control plane now (a 304 when nothing changed, so
        a revoked token or a suspension stops this very call) and look at the upstream if it
        was never listed; raise the MCP error of the primitive when the call is refused."""
        governor = self.governor
        try:
            await anyio.to_thread.run_sync(lambda: governor.follow(retry=False))
        except AgentGovError as error:
            log.warning("the control plane did not answer for %s: %s", name, error)
        tool = name if primitive == "tools" else None
        if (why := governor.link.refusal(tool)) is not None:
            raise ERRORS[primitive](f"MCP {NOUNS[primitive]} {name!r} refused: {why}.")
        if not governor.listed:  # called before any listing: look first
            started = time.monotonic()
            listing = await list_upstream(governor.upstream)
            try:
                await anyio.to_thread.run_sync(governor.saw, listing, started)
            except AgentGovError as error:
                log.warning("reporting %s failed: %s", governor.server, error)

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        governor = self.governor
        name, arguments = context.message.name, dict(context.message.arguments or {})
        await self._check_in("tools", name)
        why, approved = governor.refusal("tools", name)
        if why is not None:
            raise ToolError(why)
        if problems := argument_problems(approved["input_schema"], arguments):
            raise ToolError(f"MCP tool {name!r} was called with arguments its approved input"
                            f" schema refuses: {'; '.join(problems)}; the call was not made.")
        decision = None
        if governor.rule(name) is not None:
            decision = await anyio.to_thread.run_sync(self._decide, name, arguments)
        result = await call_next(context)
        governor.client.tool_call(name, agent=governor.agent)
        if decision is not None:
            governor.client.action(name, amount=_number(arguments.get("amount")),
                                   decision_id=decision.id, agent=governor.agent)
        return result

    async def on_get_prompt(self, context: Any, call_next: Any) -> Any:
        name = context.message.name
        await self._check_in("prompts", name)
        why, _ = self.governor.refusal("prompts", name)
        if why is not None:
            raise PromptError(why)
        return await call_next(context)

    async def on_read_resource(self, context: Any, call_next: Any) -> Any:
        uri = str(context.message.uri)
        await self._check_in("resources", uri)
        if (why := self.governor.readable(uri)) is not None:
            raise ResourceError(why)
        return await call_next(context)

    def _decide(self, name: str, arguments: dict[str, Any]) -> Any:
        """Ask for a runtime decision on the call (its tool, action and full arguments) and
        wait for a human where the rule needs one."""
        governor = self.governor
        decision = governor.contact(lambda: governor.client.decide(
            name, tool=name, arguments=arguments, wait_seconds=self.decision_wait,
            wait=self.decision_wait, poll=self.decision_poll, agent=governor.agent))
        if not decision.allowed:
            said = "no human answered in time" if decision.pending else decision.outcome
            raise ToolError(f"MCP tool {name!r} needs sign-off: decision {decision.id} says"
                            f" {said}; the call was not made.")
        return decision


def _as_mcp(primitive: str, item: Any) -> Any:
    """A FastMCP component as the MCP SDK object it is listed as."""
    convert = {"tools": "to_mcp_tool", "prompts": "to_mcp_prompt",
               "resources": "to_mcp_resource", "resource_templates": "to_mcp_template"}
    method = getattr(item, convert[primitive], None)
    return method() if method is not None else item


def _number(value: Any) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


# --- sampling and elicitation from the server -------------------------------------------------


class GovernedProxyClient(ProxyClient):
    """FastMCP's proxy client, whose relays of the server's sampling and elicitation requests
    ask the governor first: refused unless the server's entry allows them."""

    governor: McpGovernor

    def _bind_restoring_handlers(self) -> None:
        super()._bind_restoring_handlers()
        self._session_kwargs["sampling_callback"] = create_sampling_callback(
            _make_restoring_handler(self._gated("sampling", default_proxy_sampling_handler),
                                    self._proxy_rc_ref))
        self._session_kwargs["elicitation_callback"] = create_elicitation_callback(
            _make_restoring_handler(self._gated("elicitation",
                                                default_proxy_elicitation_handler),
                                    self._proxy_rc_ref))

    def _gated(self, kind: str, relay: Callable[..., Any]) -> Callable[..., Any]:
        governor = self.governor

        async def gate(*args: Any, **kwargs: Any) -> Any:
            if (why := governor.link.refusal()) is not None:
                raise RuntimeError(f"the governed proxy refuses {kind}: {why}")
            if not governor.allowed(kind):
                raise RuntimeError(
                    f"the governed proxy refuses {kind} requests from MCP server"
                    f" {governor.server}: its entry in the agent's spec does not set"
                    f" allow_{kind}: true")
            return await relay(*args, **kwargs)

        return gate


# --- running it -------------------------------------------------------------------------------


def watch_upstream(governor: McpGovernor, *, interval: float, stop: threading.Event) -> None:
    """Every `interval` seconds: follow the desired state and list the upstream, reporting
    what it offers, so a change is drift (and hidden) even while the agent lists nothing. The
    first pass waits one interval: at start-up the agent's own first request lists the
    upstream, and a second upstream starting beside it slows the proxy's first answer."""
    while not stop.wait(interval):
        try:
            governor.follow()
            started = time.monotonic()
            governor.saw(anyio.run(list_upstream, governor.upstream), started)
        except (Unauthenticated, Forbidden) as error:
            log.error("the control plane refused the proxy's token (%s): every governed call"
                      " is refused", error)
        except Exception as error:  # the upstream or the control plane may fail in any way
            log.warning("watching %s failed: %s; trying again in %ss", governor.server, error,
                        interval)


def build_proxy(governor: McpGovernor, *, decision_wait: float = 300.0,
                decision_poll: float = 0.5) -> FastMCP:
    """The FastMCP proxy server with the governance middleware in front of the upstream."""
    backend = GovernedProxyClient(governor.upstream.connection())
    backend.governor = governor
    proxy = create_proxy(backend, name=f"agentgov-{governor.server}")
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
          decision_wait: float = 300.0, fail_open_seconds: float = 0.0,
          read_only_tools: Iterable[str] = (), report_every: float = 60.0) -> None:
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
    link = ControlPlaneLink(fail_open_seconds=fail_open_seconds,
                            read_only_tools=frozenset(read_only_tools))
    governor = McpGovernor(client, agent, server, source, link=link, report_every=report_every)
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
