"""The framework-neutral half of every adapter: what the agent object really runs with becomes
its observed state, the desired state arriving through `watch` is applied to the object, and
every tool call passes one gate before it runs.

A framework module supplies a `Binding` (how to read and change one kind of agent object) and
calls `Governor.gate` / `Governor.agate` around each tool call; everything else lives here.

The gate holds the rules it enforces (approved tools, data scopes, action thresholds, call
limits) copied from the last desired state applied; they are part of the observed state, so a
rule removed in the running process is drift the control plane sees and corrects."""

from __future__ import annotations

import asyncio
import copy
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from agentgov.control_link import ControlLink, is_lost_credentials
from agentgov.errors import AgentGovError, ApiError

if TYPE_CHECKING:
    from agentgov.client import Client
    from agentgov.responses import Decision, DesiredState

log = logging.getLogger("agentgov.adapters")

RECORD_ARGUMENTS = ("record", "order", "order_id", "customer", "customer_id", "id")
WINDOW_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class ToolRefused(Exception):
    """The gate refused a tool call; the message is what the model is told."""


class Ungovernable(AgentGovError):
    """`start()` found something the adapter cannot gate (a provider-run tool, a tool type
    it does not know): the agent is not started rather than run partly ungoverned."""


class CredentialsRefused(ToolRefused):
    """The control plane refused the agent's token (401/403: revoked, retired, another
    agent's): no governed call runs any more, so the adapters stop the run with this instead
    of telling the model and letting it try the next tool."""


class Binding(Protocol):
    """How to read and change one framework's agent object."""

    framework: str

    def tools(self) -> list[str]:
        """Names of the tools the model can call now (the framework's names)."""

    def model(self) -> Any:
        """The model object (or name) the agent runs with now."""

    def set_model(self, model: Any) -> None:
        """Make the agent run with `model` from its next step on."""

    def remove_tools(self, names: set[str]) -> None:
        """Take these tools (framework names) away from the model and the executor."""

    def mcp_servers(self) -> list[dict[str, Any]]:
        """The MCP servers the agent connects to: [{name, url | command}]."""

    def install_gate(self, governor: Governor) -> None:
        """Route every tool call through `governor.gate`/`agate`; idempotent, and run again
        at each observation so toolsets added later are gated too."""


def model_name(model: Any) -> str | None:
    """The name a model object answers to (a string is its own name)."""
    if model is None or isinstance(model, str):
        return model
    for attribute in ("model_name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def read_amount(value: Any) -> float | None:
    """A finite amount from a tool argument (the model may send a number as a string, which the
    tool's validation would accept); None when there is none or it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        amount = float(value)
    except ValueError:
        return None
    return amount if math.isfinite(amount) else None


def server_identity(server: dict[str, Any]) -> str | None:
    """Where an MCP server is, spelled one way: its URL (scheme and host lower-cased, no
    trailing slash) or its command (single spaces)."""
    url = server.get("url")
    if isinstance(url, str) and url.strip():
        parts = urlsplit(url.strip())
        return urlunsplit((parts.scheme.lower(), parts.netloc.lower(),
                           parts.path.rstrip("/"), parts.query, ""))
    command = server.get("command")
    if isinstance(command, str) and command.strip():
        return "command:" + " ".join(command.split())
    return None


def window_seconds(per: str) -> float:
    """"30s", "15m", "1h", "1d" in seconds."""
    return float(per[:-1]) * WINDOW_UNITS[per[-1]]


@dataclass
class Rules:
    """What the gate enforces: copied from the desired state applied last."""

    tools: set[str] = field(default_factory=set)
    data: list[dict[str, Any]] = field(default_factory=list)
    grants: list[dict[str, Any]] = field(default_factory=list)
    actions: dict[str, dict[str, Any]] = field(default_factory=dict)
    limits: list[dict[str, Any]] = field(default_factory=list)
    enforcement: dict[str, str] = field(default_factory=dict)
    # The tools approved on each MCP server, by server name (the manifest's `mcp_servers`).
    mcp_tools: dict[str, set[str]] = field(default_factory=dict)
    # The approved MCP servers' names by where they are (`server_identity`), so a framework
    # object named otherwise (its URL's host, an id of the owner's) is still known.
    mcp_names: dict[str, str] = field(default_factory=dict)
    running: bool = True

    @classmethod
    def from_desired(cls, desired: DesiredState) -> Rules:
        spec = copy.deepcopy(desired.spec)
        return cls(tools=set(spec.get("tools") or ()), data=spec.get("data") or [],
                   grants=spec.get("grants") or [], actions=spec.get("actions") or {},
                   limits=spec.get("limits") or [], enforcement=spec.get("enforcement") or {},
                   mcp_tools={server.get("name"): {tool.get("name")
                                                   for tool in server.get("tools") or ()}
                              for server in spec.get("mcp_servers") or ()},
                   mcp_names={identity: server.get("name")
                              for server in spec.get("mcp_servers") or ()
                              if (identity := server_identity(server))},
                   running=desired.running)

    def resources(self) -> set[str]:
        return {entry["resource"] for entry in [*self.data, *self.grants]}


@dataclass(frozen=True)
class Call:
    """One tool call as the control plane sees it."""

    tool: str
    resource: str | None
    record: str | None
    amount: float | None
    server: str | None = None  # the MCP server the tool is called on, if any


class Governor:
    """Keeps one agent object on its approved state and gates its tool calls."""

    def __init__(self, binding: Binding, client: Client, *, name: str | None = None,
                 tool_names: dict[str, str] | None = None,
                 resources: dict[str, str] | None = None,
                 models: dict[str, Any] | None = None, interval: float = 5.0,
                 heartbeat: float = 30.0, decision_wait: float = 300.0,
                 decision_poll: float = 1.0,
                 proxied_mcp_servers: Iterable[str] = (),
                 fail_open_seconds: float | None = None,
                 read_only_tools: Iterable[str] = ()) -> None:
        self.binding = binding
        self.client = client
        self.agent = name or client.agent
        if not self.agent:
            raise ValueError("name the governed agent: govern(..., name='refund-agent')")
        self.tool_names = dict(tool_names or {})
        # MCP servers the agent reaches through `agentctl mcp-proxy`: reported by name only,
        # as the proxy's URL is not the server's (the proxy reports where the server is)
        self.proxied_mcp_servers = set(proxied_mcp_servers)
        self.resources = dict(resources or {})
        # The model objects seen, by name, so a swapped model can be swapped back.
        self.models: dict[str, Any] = dict(models or {})
        self.interval = interval
        self.heartbeat = heartbeat
        self.decision_wait = decision_wait
        self.decision_poll = decision_poll
        # Every answer the client gets (watch, heartbeats, decisions, events) feeds the link;
        # the gate asks it first (see agentgov.control_link for the grace and the allow-list).
        # One link per client (per token): governors sharing a client share its fate.
        if client.link is None:
            client.link = ControlLink(fail_open_seconds=fail_open_seconds,
                                      read_only_tools=read_only_tools)
        self.link = client.link
        self.rules: Rules | None = None
        # The MCP servers go under the key the manifest's MCP section uses (`mcp_servers`).
        self.report_mcp_servers = True
        self.applied: DesiredState | None = None
        self.refused: list[tuple[str, str]] = []  # (tool, why), newest last
        self._calls: deque[tuple[float, str, str | None]] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._in_callback = 0  # the watch is applying or observing (stop() waits for it)
        self._remember_model()
        binding.install_gate(self)

    # --- names -----------------------------------------------------------------------------

    def governance_name(self, tool: str) -> str:
        """The control plane's name of a framework tool (`tool_names` maps the ones that
        differ, e.g. providers that forbid dots in function names)."""
        return self.tool_names.get(tool, tool)

    def mcp_server_name(self, server: dict[str, Any]) -> str:
        """The spec's name of a framework's MCP server object ({name, url | command}): the
        approved server at the same place, else the approved server of that name, else the
        object's own name (which then approves nothing)."""
        with self._lock:
            rules = self.rules
        if rules is not None:
            identity = server_identity(server)
            if identity is not None and identity in rules.mcp_names:
                return rules.mcp_names[identity]
        return str(server.get("name"))

    def _remember_model(self) -> None:
        model = self.binding.model()
        name = model_name(model)
        if name and not isinstance(model, str):
            self.models.setdefault(name, model)

    # --- observe -----------------------------------------------------------------------------

    def observe(self) -> dict[str, Any]:
        """The observed state, read from the agent object and the gate."""
        self._remember_model()
        self.binding.install_gate(self)
        state: dict[str, Any] = {
            "framework": self.binding.framework,
            "tools": sorted({self.governance_name(tool) for tool in self.binding.tools()}),
        }
        name = model_name(self.binding.model())
        if name:
            state["model"] = name
        delegates = getattr(self.binding, "delegates_to", list)()
        if delegates:
            state["delegates_to"] = delegates
        servers = [{**server, "name": self.mcp_server_name(server)}
                   for server in self.binding.mcp_servers()]
        servers = [{"name": server["name"]} if server["name"] in self.proxied_mcp_servers
                   else server for server in servers]
        if servers and self.report_mcp_servers:
            state["mcp_servers"] = servers
        rules = self.rules
        if rules is not None:
            state.update(data=copy.deepcopy(rules.data), actions=copy.deepcopy(rules.actions),
                         limits=copy.deepcopy(rules.limits), running=rules.running)
            if rules.grants:
                state["grants"] = copy.deepcopy(rules.grants)
        return state

    def report(self) -> None:
        """Report the observed state now (also the heartbeat: unchanged counts as one)."""
        state = self.observe()
        try:
            self.client.report_observed(state, self.agent)
        except ApiError as error:
            # A control plane without MCP servers in its spec refuses the key: report the rest
            # (the first report, at start, finds out, before the watch loop runs).
            if "mcp_servers" not in state or not any(
                    pointer.startswith("/mcp_servers") for pointer in error.pointers):
                raise
            log.warning("%s: the control plane does not take mcp_servers; not reporting them",
                        self.agent)
            self.report_mcp_servers = False
            self.client.report_observed(self.observe(), self.agent)

    # --- apply (corrections arrive here) --------------------------------------------------------

    def apply(self, desired: DesiredState) -> dict[str, Any]:
        """Make the running object match the desired state; returns the new observation."""
        rules = Rules.from_desired(desired)
        unapproved = {tool for tool in self.binding.tools()
                      if self.governance_name(tool) not in rules.tools}
        if unapproved and self.applied is None:
            # The object had them before governance started: they were reported at start,
            # so the control plane opens a finding and its correction (audited, with the
            # enforcement the spec asks for) removes them. The gate refuses them meanwhile.
            log.warning("%s: unapproved tool(s) %s left for the control plane to correct; "
                        "the gate refuses them", self.agent, sorted(unapproved))
        elif unapproved:
            log.warning("%s: removing unapproved tool(s) %s", self.agent, sorted(unapproved))
            self.binding.remove_tools(unapproved)
        wanted = desired.spec.get("model") or None
        current = model_name(self.binding.model())
        if wanted and current and wanted != current:
            if wanted in self.models:
                log.warning("%s: swapping model %s back to %s", self.agent, current, wanted)
                self.binding.set_model(self.models[wanted])
            else:
                log.error("%s: runs model %s, approved %s, and no %s model object is known "
                          "(pass models={...} to govern)", self.agent, current, wanted, wanted)
        with self._lock:
            self.rules = rules
        self.applied = desired
        if not rules.running:
            log.warning("%s is suspended: every tool call is refused", self.agent)
        return self.observe()

    # --- the loop ----------------------------------------------------------------------------

    def start(self) -> Governor:
        """Load the approved rules, report what the object runs with, then keep watching
        (applying each new desired state) and sending heartbeats in background threads."""
        unhookable = getattr(self.binding, "unhookable", list)()
        if unhookable:
            raise Ungovernable(f"{self.agent}: the {self.binding.framework} adapter cannot gate "
                               f"{'; '.join(unhookable)}: remove it, or run the agent "
                               "ungoverned knowingly")
        desired = self.client.desired_state(self.agent)
        with self._lock:
            self.rules = Rules.from_desired(desired)
        self.report()
        self._stop.clear()
        self._threads = [
            threading.Thread(target=self._watch, name=f"agentgov-watch-{self.agent}",
                             daemon=True),
            threading.Thread(target=self._beat, name=f"agentgov-heartbeat-{self.agent}",
                             daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop watching (the agent object keeps its current state). Waits up to `timeout`
        for a heartbeat or an apply under way, never for a pull the control plane holds (up
        to `interval` seconds): its answer is dropped when it comes."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            watching = thread is self._threads[0]  # start() puts the watch first
            while thread.is_alive() and time.monotonic() < deadline and not (
                    watching and not self._in_callback):
                thread.join(0.05)

    def __enter__(self) -> Governor:
        return self if self._threads else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _watch(self) -> None:
        # Drift in the object is reported, never silently undone: the control plane decides
        # (correct, block, escalate or log) and its correction comes back as desired state.
        try:
            self.client.watch(self._in_watch(self.apply), observe=self._in_watch(self.observe),
                              interval=self.interval, stop=self._stop, restore_drift=False,
                              agent=self.agent)
        except AgentGovError as error:
            # The link has recorded the 401/403: from now on the gate refuses every call.
            log.error("%s: the control plane refused the agent's token (%s): every governed "
                      "call is refused", self.agent, error)
        except RuntimeError:
            # Stopped, then the client was closed under a long-poll still held (stop() waits
            # only so long): nothing is left to watch. Anything else is a real failure.
            if not self._stop.is_set():
                raise

    def _in_watch(self, callback: Callable[..., Any]) -> Callable[..., Any]:
        """`callback` as the watch calls it: stop() waits while it runs."""
        def run(*args: Any) -> Any:
            self._in_callback += 1
            try:
                return callback(*args)
            finally:
                self._in_callback -= 1
        return run

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            try:
                self.report()
            except AgentGovError as error:
                log.warning("%s: heartbeat not sent: %s", self.agent, error)

    # --- the gate ----------------------------------------------------------------------------

    def describe(self, tool: str, arguments: dict[str, Any], server: str | None = None) -> Call:
        """The control plane's view of a call: tool, resource, record and amount (and the MCP
        server it is called on)."""
        name = self.governance_name(tool)
        record = next((str(arguments[key]) for key in RECORD_ARGUMENTS
                       if arguments.get(key) not in (None, "")), None)
        return Call(tool=name, resource=self.resources.get(name), record=record,
                    amount=read_amount(arguments.get("amount")), server=server)

    def check(self, tool: str, arguments: dict[str, Any], server: str | None = None
              ) -> Decision | None:
        """Refuse (ToolRefused) or allow one call before it runs; the decision that allowed
        it when it needed one. Blocks while a human decides: call it off the event loop.
        A tool of an MCP server (`server`) is approved by that server's entry in the spec's
        `mcp_servers` (its fingerprint is the governed proxy's to check), others by `tools`."""
        call = self.describe(tool, arguments, server)
        cut_off = self.link.refusal(call.tool)
        if cut_off is not None:
            raise self._refuse(call, cut_off, lost=self.link.stopped)
        with self._lock:
            rules = self.rules
        if rules is None:
            raise self._refuse(call, "the agent has no approved state yet")
        if not rules.running:
            raise self._refuse(call, "the agent is suspended")
        if call.server is not None:
            if call.tool not in rules.mcp_tools.get(call.server, ()):
                raise self._refuse(call, f"tool {call.tool} of MCP server {call.server} is not"
                                         " approved for this agent")
        elif call.tool not in rules.tools:
            raise self._refuse(call, f"tool {call.tool} is not approved for this agent")
        if call.resource is not None and call.resource not in rules.resources():
            raise self._refuse(call, f"no approved access to {call.resource}")
        self._check_limits(call, rules)
        return self._check_action(call, arguments, rules)

    def withhold(self, tool: str, why: str) -> None:
        """Record a tool kept from the model (the framework would run it out of the gate's
        sight): it is never offered, so it never runs."""
        log.warning("%s: withheld %s: %s", self.agent, tool, why)
        self.refused.append((tool, why))

    def refuse_unreadable(self, tool: str, server: str | None = None) -> ToolRefused:
        """The refusal of a call whose arguments are not a JSON object."""
        call = Call(tool=self.governance_name(tool), resource=None, record=None, amount=None,
                    server=server)
        return self._refuse(call, f"the arguments of {call.tool} cannot be read")

    def _refuse(self, call: Call, why: str, *, lost: bool = False) -> ToolRefused:
        log.warning("%s: refused %s: %s", self.agent, call.tool, why)
        self.refused.append((call.tool, why))
        kind = CredentialsRefused if lost else ToolRefused
        return kind(f"refused by governance: {why}")

    def _check_limits(self, call: Call, rules: Rules) -> None:
        if call.resource is None:
            return
        now = time.monotonic()
        with self._lock:
            for limit in rules.limits:
                if limit.get("resource") != call.resource:
                    continue
                since = now - window_seconds(limit.get("per") or "1h")
                seen = [record for at, resource, record in self._calls
                        if at >= since and resource == call.resource]
                if limit.get("max_calls") is not None and len(seen) >= limit["max_calls"]:
                    raise self._refuse(call, f"more than {limit['max_calls']} calls to "
                                             f"{call.resource} per {limit.get('per') or '1h'}")
                same = limit.get("max_same_record")
                if same is not None and call.record and seen.count(call.record) >= same:
                    raise self._refuse(call, f"record {call.record} read {same} times already")
            self._calls.append((now, call.resource, call.record))
            while self._calls and now - self._calls[0][0] > 86400:
                self._calls.popleft()

    def _check_action(self, call: Call, arguments: dict[str, Any],
                      rules: Rules) -> Decision | None:
        """A tool whose action has a rule is judged by the control plane's one decision
        function, from the call's own arguments: the gate reads no amount itself, so a value
        the rule needs and the model spelled another way is the server's deny, not a guess."""
        limits = rules.actions.get(call.tool)
        if not limits or (limits.get("approval_above") is None and limits.get("max") is None):
            return None
        mode = rules.enforcement.get("actions") or rules.enforcement.get("default") or "correct"
        wait = 0.0 if mode == "block" else self.decision_wait
        try:
            decision = self.client.decide(call.tool, tool=call.tool, arguments=arguments,
                                          resource=call.resource, record=call.record,
                                          wait_seconds=wait or None, wait=wait,
                                          poll=self.decision_poll, agent=self.agent)
        except AgentGovError as error:
            # No decision is no permission: the call needs one and could not get it.
            raise self._refuse(call, f"{call.tool} needs a decision and the control plane did "
                                     f"not give one ({error})",
                               lost=is_lost_credentials(error)) from None
        if decision.allowed:
            return decision
        if mode == "log":
            log.warning("%s: %s not allowed (%s) but enforcement is log", self.agent, call.tool,
                        decision.outcome)
            return None
        # pending: still waiting when our wait ran out; expired: the control plane ended it
        # when our wait (wait_seconds) ran out. Either way nobody answered.
        why = "no human answered in time" if decision.pending or decision.status == "expired" \
            else f"denied ({decision.rule or decision.status})"
        raise self._refuse(call, f"{call.tool}: {why}")

    def record(self, tool: str, arguments: dict[str, Any], decision: Decision | None,
               server: str | None = None) -> None:
        """The behaviour events of a call that ran (queued; never blocks)."""
        call = self.describe(tool, arguments, server)
        self.client.tool_call(call.tool, resource=call.resource, record=call.record,
                              agent=self.agent)
        with self._lock:
            is_action = self.rules is not None and call.tool in self.rules.actions
        if is_action:
            self.client.action(call.tool, amount=call.amount, resource=call.resource,
                               record=call.record, agent=self.agent,
                               decision_id=decision.id if decision else None,
                               approved_by=(decision.raw.get("decided_by") or None)
                               if decision else None)

    def gate(self, tool: str, arguments: dict[str, Any], run: Callable[[], Any]) -> Any:
        """Check, run, record: around one synchronous tool call."""
        decision = self.check(tool, arguments)
        result = run()
        self.record(tool, arguments, decision)
        return result

    async def agate(self, tool: str, arguments: dict[str, Any],
                    run: Callable[[], Awaitable[Any]], server: str | None = None) -> Any:
        """Check, run, record: around one asynchronous tool call (the check, which may wait
        for a human, runs in a thread so the event loop keeps going); `server` names the MCP
        server the tool is called on."""
        decision = await asyncio.to_thread(self.check, tool, arguments, server)
        result = await run()
        self.record(tool, arguments, decision, server)
        return result


def _field(holder: Any, name: str) -> Any:
    """A dict's key or an object's attribute (frameworks keep server parameters either way)."""
    return holder.get(name) if isinstance(holder, dict) else getattr(holder, name, None)


def describe_mcp_server(server: Any) -> dict[str, Any]:
    """{name, url | command} of a framework's MCP server object, read from where the
    frameworks keep them (the object, its `params`, its client's transport)."""
    params = getattr(server, "params", None)
    transport = getattr(getattr(server, "client", None), "transport", None)
    url = next((value for value in (_field(server, "url"), _field(params, "url"),
                                    _field(transport, "url")) if value), None)
    command = (_field(server, "command") or _field(params, "command")
               or _field(transport, "command"))
    name = next((value for value in (getattr(server, attribute, None)
                                     for attribute in ("name", "id", "label"))
                 if isinstance(value, str) and value), None)
    entry: dict[str, Any] = {"name": name or str(url or command or type(server).__name__)}
    if url:
        entry["url"] = str(url)
    elif command:
        args = (_field(server, "args") or _field(params, "args") or _field(transport, "args")
                or [])
        entry["command"] = " ".join([str(command), *map(str, args)])
    return entry
