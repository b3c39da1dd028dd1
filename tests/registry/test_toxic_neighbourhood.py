"""The fast toxic judge against the old one, as pure functions on random small fleets: judging a
change on the agents around it (Neighbourhoods.around) gives exactly the paths, hops included,
that the old whole-fleet `new_paths` (kept here as the reference) gives."""

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from registry.toxic import Neighbourhoods, meeting_points, new_paths, paths_through, toxic_paths


@dataclass(frozen=True)
class Rule:
    name: str
    left: str
    right: str


def reference_new_paths(before, after, agent, rules):
    """`new_paths` as it was: every path of both whole fleets, split by key."""
    was = {path.key for path in toxic_paths(before, rules)}
    created, kept = [], []
    for path in paths_through(toxic_paths(after, rules), agent):
        (kept if path.key in was else created).append(path)
    return created, kept


NAMES = ["ana", "ben", "cy", "dee", "eve", "fin"]
RESOURCES = ["customers_db", "orders_db"]
ACCESS = ["read", "write", "admin"]
TOOLS = ["email.send_external", "orders.lookup"]
# Two names for one URL (they still meet), a stdio server, and one used by nobody else.
SERVERS = [{"name": "tools", "transport": "http", "url": "https://mcp.internal/tools"},
           {"name": "shared", "transport": "http", "url": "https://mcp.internal/tools"},
           {"name": "local", "transport": "stdio", "command": "run-tools --local"},
           {"name": "lonely", "transport": "http", "url": "https://mcp.internal/lonely"}]
CAPABILITIES = ([f"data:{r}:{a}" for r in RESOURCES for a in ACCESS]
                + [f"tool:{t}" for t in TOOLS])

access = st.lists(st.tuples(st.sampled_from(RESOURCES), st.sampled_from(ACCESS)), max_size=2)
states = st.fixed_dictionaries({
    "data": access.map(lambda pairs: [{"resource": r, "access": a} for r, a in pairs]),
    "grants": access.map(lambda pairs: [{"resource": r, "access": a} for r, a in pairs]),
    "tools": st.lists(st.sampled_from(TOOLS), unique=True, max_size=2),
    # "ghost" is in no fleet: delegating to it joins nobody
    "delegates_to": st.lists(st.sampled_from([*NAMES, "ghost"]), unique=True, max_size=3),
    "mcp_servers": st.lists(st.sampled_from(SERVERS), max_size=2),
})
fleets = st.dictionaries(st.sampled_from(NAMES), states, max_size=len(NAMES))
rule_sets = st.lists(st.tuples(st.sampled_from(CAPABILITIES), st.sampled_from(CAPABILITIES)),
                     min_size=1, max_size=3).map(
    lambda pairs: [Rule(f"rule-{i}", left, right) for i, (left, right) in enumerate(pairs)])


@settings(max_examples=400, deadline=None)
@given(fleet=fleets, agent=st.sampled_from([*NAMES, "newcomer"]), spec=states,
       rules=rule_sets)
def test_judging_a_change_on_its_neighbourhood_finds_what_the_whole_fleet_finds(
        fleet, agent, spec, rules):
    after = {**fleet, agent: spec}
    expected = reference_new_paths(fleet, after, agent, rules)
    assert new_paths(fleet, after, agent, rules) == expected
    near = Neighbourhoods(fleet).around(agent, spec)
    assert new_paths(near, {**near, agent: spec}, agent, rules) == expected


@settings(max_examples=200, deadline=None)
@given(fleet=fleets, agent=st.sampled_from([*NAMES, "newcomer"]), spec=states)
def test_the_neighbourhood_is_closed_and_holds_the_agent_as_it_is(fleet, agent, spec):
    near = Neighbourhoods(fleet).around(agent, spec)
    if agent in fleet:
        assert near[agent] == fleet[agent]
    reached = meeting_points(agent, spec).union(
        *(meeting_points(name, state) for name, state in near.items()))
    outside = {name for name, state in fleet.items() if name not in near}
    assert all(not meeting_points(name, fleet[name]) & reached for name in outside)


def test_two_agents_meet_at_a_server_whatever_each_calls_it():
    fleet = {"ana": {"mcp_servers": [SERVERS[0]]}, "ben": {"mcp_servers": [SERVERS[1]]},
             "cy": {"mcp_servers": [SERVERS[3]]}}
    assert set(Neighbourhoods(fleet).around("ana", fleet["ana"])) == {"ana", "ben"}
    assert set(Neighbourhoods(fleet).around("dee", {"delegates_to": ["cy"]})) == {"cy"}
