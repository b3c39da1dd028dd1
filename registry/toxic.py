"""Toxic combinations: capabilities that must never meet across the fleet (pure, no Django).

A rule names two capabilities ("data:customers_db:read", "tool:email.send_external"). They
meet when an agent holding one can reach an agent holding the other: through delegation (an
agent's `delegates_to`, in either direction, since the answer flows back), through an MCP
server or tool endpoint both use (`mcp_servers`), and through any chain of those. One agent
holding both is the shortest path of all. The same function judges approved specs (for a
proposal: the fleet as it would be) and observed states (for the fleet as it is).
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from agentgov.mcp_identity import server_identity

ACCESS_RANK = {"read": 1, "write": 2, "admin": 3}  # write implies read, admin implies both
CAPABILITY_EXPECTED = ("a capability: data:<resource>:<read|write|admin> (that access or more)"
                       " or tool:<tool name>")


class RuleLike(Protocol):
    name: str
    left: str
    right: str


@dataclass(frozen=True)
class Capability:
    """What an agent may do that a rule cares about: access to a resource, or a tool."""

    kind: str  # data | tool
    name: str
    access: str = ""

    @classmethod
    def parse(cls, text: str) -> Capability:
        """data:customers_db:read or tool:email.send_external; ValueError otherwise."""
        parts = text.split(":") if isinstance(text, str) else []
        if len(parts) == 3 and parts[0] == "data" and parts[1] and parts[2] in ACCESS_RANK:
            return cls("data", parts[1], parts[2])
        if len(parts) == 2 and parts[0] == "tool" and parts[1]:
            return cls("tool", parts[1])
        raise ValueError(f"expected {CAPABILITY_EXPECTED}; got {text!r}")

    def __str__(self) -> str:
        return f"data:{self.name}:{self.access}" if self.kind == "data" else f"tool:{self.name}"

    def held_by(self, state: Mapping[str, Any]) -> bool:
        """Whether a spec or observed state holds it (data scopes and grants both count)."""
        if self.kind == "tool":
            return self.name in _strings(state.get("tools"))
        need = ACCESS_RANK[self.access]
        return any(isinstance(entry, Mapping) and entry.get("resource") == self.name
                   and ACCESS_RANK.get(entry.get("access"), 4) >= need
                   for key in ("data", "grants") for entry in _list(state.get(key)))

    def describe(self) -> str:
        if self.kind == "tool":
            return f"can use {self.name}"
        return f"can {self.access} {self.name}"


@dataclass(frozen=True)
class Hop:
    """One step of a path: from one agent to the next, and what connects them."""

    source: str
    target: str
    via: str  # "delegates_to" (source may call target), "called_by" or "mcp:<server>"

    def describe(self) -> str:
        if self.via == "delegates_to":
            return f"{self.source} calls {self.target}"
        if self.via == "called_by":
            return f"{self.source} is called by {self.target}"
        return f"{self.source} and {self.target} share {self.via.removeprefix('mcp:')}"


@dataclass(frozen=True)
class ToxicPath:
    """Two agents (or one) that join the two sides of a rule, and the shortest way between."""

    rule: str
    left_agent: str
    left: str
    right_agent: str
    right: str
    hops: tuple[Hop, ...]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.rule, self.left_agent, self.right_agent)

    @property
    def agents(self) -> list[str]:
        return [self.left_agent, *(hop.target for hop in self.hops)]

    def describe(self) -> str:
        """agent -> agent, with the capability at each end."""
        left = Capability.parse(self.left).describe()
        right = Capability.parse(self.right).describe()
        if not self.hops:
            return f"{self.left_agent} ({left} and {right}) holds both"
        middle = [hop.target for hop in self.hops[:-1]]
        return " -> ".join([f"{self.left_agent} ({left})", *middle,
                            f"{self.right_agent} ({right})"]) + " (" + "; ".join(
            hop.describe() for hop in self.hops) + ")"

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "left_agent": self.left_agent, "left": self.left,
                "right_agent": self.right_agent, "right": self.right,
                "agents": self.agents, "description": self.describe(),
                "hops": [{"from": h.source, "to": h.target, "via": h.via} for h in self.hops]}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    return [item for item in _list(value) if isinstance(item, str)]


def server_point(server: Mapping[str, Any]) -> str | None:
    """Where an MCP server is, as its one identity (agentgov.mcp_identity: host case, default
    port, trailing slash, query, fragment and command spacing never make another server), so
    two agents that spell one server differently, or call it under different names, still
    share it. A spelling the identity cannot read (only in states stored before it was
    checked) stands as written, and a server with no url or command by its name."""
    try:
        return server_identity(server)
    except ValueError:
        where = server.get("url") or server.get("command") or server.get("name")
        return where.strip() if isinstance(where, str) and where.strip() else None


def _servers(value: Any) -> list[str]:
    """The MCP servers an agent reaches, each by its identity."""
    points = (server_point(server) for server in _list(value) if isinstance(server, Mapping))
    return [point for point in points if point]


def _edges(states: Mapping[str, Mapping[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """Adjacency over agents and servers: agent -> [(neighbour, via)]. A server is a node
    ("mcp:<name>") so a server shared by k agents costs k edges, not k squared."""
    graph: dict[str, list[tuple[str, str]]] = {name: [] for name in states}
    for name, state in states.items():
        for callee in _strings(state.get("delegates_to")):
            if callee in states and callee != name:
                graph[name].append((callee, "delegates_to"))
                graph[callee].append((name, "called_by"))
        for server in _servers(state.get("mcp_servers")):
            node = f"mcp:{server}"
            graph.setdefault(node, []).append((name, node))
            graph[name].append((node, node))
    return graph


def _shortest(graph: dict[str, list[tuple[str, str]]], start: str) -> dict[str, tuple[str, str]]:
    """Breadth-first parents from `start`: node -> (parent, via); deterministic order."""
    parents: dict[str, tuple[str, str]] = {start: ("", "")}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for neighbour, via in sorted(graph.get(node, [])):
            if neighbour not in parents:
                parents[neighbour] = (node, via)
                queue.append(neighbour)
    return parents


def _hops(parents: dict[str, tuple[str, str]], end: str) -> tuple[Hop, ...]:
    """The agent-to-agent steps from the search's start to `end` (agent names are slugs, so
    a node named mcp:... is always a server, named on the step that crosses it)."""
    chain = [end]
    while parents[chain[-1]][0]:
        chain.append(parents[chain[-1]][0])
    chain.reverse()
    hops, previous = [], chain[0]
    for index, node in enumerate(chain[1:], start=1):
        if node.startswith("mcp:"):
            continue
        before = chain[index - 1]
        hops.append(Hop(previous, node, before if before.startswith("mcp:") else
                        parents[node][1]))
        previous = node
    return tuple(hops)


def toxic_paths(states: Mapping[str, Mapping[str, Any]],
                rules: Iterable[RuleLike]) -> list[ToxicPath]:
    """Every (rule, left-holder, right-holder) that can reach each other, with a shortest
    path, sorted. `states` maps agent names to specs or observed states."""
    graph = _edges(states)
    found: dict[tuple[str, str, str], ToxicPath] = {}
    for rule in rules:
        left, right = Capability.parse(rule.left), Capability.parse(rule.right)
        holders_right = {n for n, s in states.items() if right.held_by(s)}
        if not holders_right:
            continue
        for start in sorted(n for n, s in states.items() if left.held_by(s)):
            parents = _shortest(graph, start)
            for end in sorted(holders_right & parents.keys()):
                path = ToxicPath(rule.name, start, str(left), end, str(right),
                                 _hops(parents, end))
                found.setdefault(path.key, path)
    return sorted(found.values(), key=lambda p: p.key)


def paths_through(paths: Iterable[ToxicPath], agent: str) -> Iterator[ToxicPath]:
    """The paths an agent is on (at an end or in between)."""
    return (path for path in paths if agent in path.agents)


def _components(graph: dict[str, list[tuple[str, str]]]) -> dict[str, int]:
    """A label per node, shared by the nodes that reach each other (every edge goes both ways,
    so reaching is joining)."""
    label: dict[str, int] = {}
    for first in graph:
        if first in label:
            continue
        label[first], stack = len(label), [first]
        while stack:
            for neighbour, _ in graph.get(stack.pop(), ()):
                if neighbour not in label:
                    label[neighbour] = label[first]
                    stack.append(neighbour)
    return label


def new_paths(before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]],
              agent: str, rules: list[RuleLike]) -> tuple[list[ToxicPath], list[ToxicPath]]:
    """For a change to one agent: (paths through it the change would create, paths through it
    that exist already); each list sorted by key.

    The same answer as splitting `paths_through(toxic_paths(after, rules), agent)` by whether
    `toxic_paths(before, rules)` has the key, for less: a path through the agent starts and
    ends in its part of `after`, so only those holders are searched from, and a key existed
    before exactly when its two ends held their sides and were joined (any way at all)."""
    if agent not in after:
        return [], []
    graph = _edges(after)
    near = sorted(node for node in _shortest(graph, agent) if node in after)
    joined = _components(_edges(before))
    found: dict[tuple[str, str, str], tuple[ToxicPath, bool]] = {}
    for rule in rules:
        left, right = Capability.parse(rule.left), Capability.parse(rule.right)
        ends = [name for name in near if right.held_by(after[name])]
        if not ends:
            continue
        for start in (name for name in near if left.held_by(after[name])):
            parents = _shortest(graph, start)
            for end in ends:
                path = ToxicPath(rule.name, start, str(left), end, str(right),
                                 _hops(parents, end))
                if agent in path.agents and path.key not in found:
                    existed = (start in before and end in before
                               and left.held_by(before[start]) and right.held_by(before[end])
                               and joined[start] == joined[end])
                    found[path.key] = (path, existed)
    created = [path for path, existed in found.values() if not existed]
    kept = [path for path, existed in found.values() if existed]
    return sorted(created, key=lambda p: p.key), sorted(kept, key=lambda p: p.key)


def meeting_points(name: str, state: Mapping[str, Any]) -> set[str]:
    """Where an agent meets others: its own name (its callers meet it there), each agent it
    calls, and "mcp:" + the SHA-256 of each of its MCP servers' identity (short enough for an
    index whatever the URL). Two agents one step apart always share a point (two that share
    one may not be joined: both may call an agent outside the fleet), so following shared
    points from a change's own points gathers every agent a path through it can touch."""
    servers = (hashlib.sha256(where.encode()).hexdigest()
               for where in _servers(state.get("mcp_servers")))
    return {name, *_strings(state.get("delegates_to")), *(f"mcp:{digest}" for digest in servers)}


class Neighbourhoods:
    """States indexed by meeting point, to cut out the part of them a change to one agent
    can touch. `states` must be closed: no state outside it shares a point with one inside
    (the whole fleet is; so is what registry/toxic_fleet.py reads around some proposals)."""

    def __init__(self, states: Mapping[str, Mapping[str, Any]]) -> None:
        self.states = states
        self._points = {name: meeting_points(name, state) for name, state in states.items()}
        self._at: dict[str, list[str]] = {}
        for name, points in self._points.items():
            for point in points:
                self._at.setdefault(point, []).append(name)

    @property
    def points(self) -> set[str]:
        """Every point some state meets at."""
        return set(self._at)

    def around(self, agent: str, state: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        """The states of the agents that share points, through any chain, with `agent` as it
        is or as `state`: closed, so `new_paths` over them answers as over all `states`."""
        seen = meeting_points(agent, state)
        queue, found = deque(seen), {}
        while queue:
            for name in self._at.get(queue.popleft(), ()):
                if name in found:
                    continue
                found[name] = self.states[name]
                for point in self._points[name] - seen:
                    seen.add(point)
                    queue.append(point)
        return found
