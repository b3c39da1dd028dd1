"""Toxic combinations as a pure function: a graph of agents (specs or observed states) and the
paths between the two sides of each rule, with exact expectations."""

from dataclasses import dataclass

import pytest

from registry.toxic import Capability, Hop, ToxicPath, new_paths, toxic_paths


@dataclass
class Rule:
    name: str
    left: str
    right: str


CUSTOMERS_EMAIL = Rule("customers-never-email", "data:customers_db:read",
                       "tool:email.send_external")


def mcp_server(url: str) -> dict:
    """An approved MCP server, as the manifest holds it; agents meet at its URL, whatever
    each calls it."""
    return {"name": "tools", "transport": "http", "url": url,
            "tools": []}


def agent(*, data=(), tools=(), delegates_to=(), mcp_servers=(), grants=()):
    return {"data": [{"resource": r, "access": a} for r, a in data], "tools": list(tools),
            "delegates_to": list(delegates_to),
            "mcp_servers": [mcp_server(url) for url in mcp_servers],
            "grants": [{"resource": r, "access": a} for r, a in grants]}


def test_capabilities_parse_and_read_or_more_counts():
    assert Capability.parse("data:customers_db:read") == Capability("data", "customers_db",
                                                                    "read")
    assert Capability.parse("tool:email.send_external") == Capability("tool",
                                                                      "email.send_external")
    for bad in ("data:customers_db", "data:x:root", "tool:", "customers_db", "", "x:y"):
        with pytest.raises(ValueError):
            Capability.parse(bad)
    read = Capability.parse("data:customers_db:read")
    assert read.held_by(agent(data=[("customers_db", "write")]))
    assert read.held_by(agent(grants=[("customers_db", "read")]))  # a grant is access too
    assert not read.held_by(agent(data=[("orders_db", "admin")]))
    assert not Capability.parse("data:customers_db:write").held_by(
        agent(data=[("customers_db", "read")]))


def test_delegation_joins_the_two_sides_either_way():
    fleet = {
        "support": agent(data=[("customers_db", "read")], delegates_to=["mailer"]),
        "mailer": agent(tools=["email.send_external"]),
        "orders": agent(data=[("orders_db", "read")]),
    }
    assert toxic_paths(fleet, [CUSTOMERS_EMAIL]) == [
        ToxicPath("customers-never-email", "support", "data:customers_db:read", "mailer",
                  "tool:email.send_external", (Hop("support", "mailer", "delegates_to"),))]
    # the mailer calling support is a path too: the answer flows back
    fleet["support"]["delegates_to"] = []
    fleet["mailer"]["delegates_to"] = ["support"]
    (path,) = toxic_paths(fleet, [CUSTOMERS_EMAIL])
    assert path.hops == (Hop("support", "mailer", "called_by"),)
    assert path.describe() == ("support (can read customers_db) -> mailer (can use "
                               "email.send_external) (support is called by mailer)")


def test_a_shared_mcp_server_and_a_chain_are_paths_with_the_shortest_route():
    fleet = {
        "support": agent(data=[("customers_db", "read")], mcp_servers=["https://tools.internal"]),
        "router": agent(mcp_servers=["https://tools.internal"], delegates_to=["mailer"]),
        "mailer": agent(tools=["email.send_external"]),
        "lonely": agent(tools=["email.send_external"]),
    }
    (path,) = toxic_paths(fleet, [CUSTOMERS_EMAIL])
    assert (path.left_agent, path.right_agent) == ("support", "mailer")
    assert path.agents == ["support", "router", "mailer"]
    assert path.hops == (Hop("support", "router", "mcp:https://tools.internal"),
                         Hop("router", "mailer", "delegates_to"))
    # a direct shared server is shorter than the chain and wins
    fleet["mailer"]["mcp_servers"] = [{"name": "other-name", "transport": "http",
                                       "url": "https://tools.internal", "tools": []}]
    (path,) = toxic_paths(fleet, [CUSTOMERS_EMAIL])
    assert path.hops == (Hop("support", "mailer", "mcp:https://tools.internal"),)


def test_one_agent_holding_both_is_a_path_and_unconnected_agents_are_not():
    fleet = {
        "both": agent(data=[("customers_db", "admin")], tools=["email.send_external"]),
        "reader": agent(data=[("customers_db", "read")]),
        "mailer": agent(tools=["email.send_external"], delegates_to=["nobody-registered"]),
    }
    (path,) = toxic_paths(fleet, [CUSTOMERS_EMAIL])
    assert (path.left_agent, path.right_agent, path.hops) == ("both", "both", ())
    assert path.describe() == ("both (can read customers_db and can use email.send_external) "
                               "holds both")


def test_removing_either_sides_permission_clears_the_path():
    fleet = {
        "support": agent(data=[("customers_db", "read")], delegates_to=["mailer"]),
        "mailer": agent(tools=["email.send_external"]),
    }
    assert len(toxic_paths(fleet, [CUSTOMERS_EMAIL])) == 1
    assert toxic_paths({**fleet, "support": agent(delegates_to=["mailer"])},
                       [CUSTOMERS_EMAIL]) == []
    assert toxic_paths({**fleet, "mailer": agent()}, [CUSTOMERS_EMAIL]) == []
    assert toxic_paths({**fleet, "support": agent(data=[("customers_db", "read")])},
                       [CUSTOMERS_EMAIL]) == []


def test_new_paths_names_only_what_the_change_to_one_agent_creates():
    before = {
        "support": agent(data=[("customers_db", "read")]),
        "mailer": agent(tools=["email.send_external"]),
        "a": agent(data=[("customers_db", "read")], delegates_to=["b"]),
        "b": agent(tools=["email.send_external"]),
    }
    after = {**before, "support": agent(data=[("customers_db", "read")],
                                        delegates_to=["mailer"])}
    created, kept = new_paths(before, after, "support", [CUSTOMERS_EMAIL])
    assert [p.key for p in created] == [("customers-never-email", "support", "mailer")]
    assert kept == []  # a -> b exists already and does not pass through support
    created, kept = new_paths(before, before, "a", [CUSTOMERS_EMAIL])
    assert (created, [p.key for p in kept]) == ([], [("customers-never-email", "a", "b")])


def test_rules_with_no_holders_and_several_rules_are_sorted_and_deduplicated():
    fleet = {
        "x": agent(data=[("customers_db", "read")], tools=["email.send_external"],
                   delegates_to=["y"]),
        "y": agent(data=[("customers_db", "read")], tools=["email.send_external"]),
    }
    rules = [CUSTOMERS_EMAIL, Rule("absent", "tool:nothing", "tool:email.send_external")]
    assert [p.key for p in toxic_paths(fleet, rules)] == [
        ("customers-never-email", "x", "x"), ("customers-never-email", "x", "y"),
        ("customers-never-email", "y", "x"), ("customers-never-email", "y", "y")]


def test_the_permission_diff_lists_new_ways_to_reach_other_agents_as_widening():
    from registry.permission_diff import permission_diff, risk_score
    from tests.conftest import refund_manifest

    before = refund_manifest().spec
    after = refund_manifest(delegates_to=["mailer"]).spec
    changes = [c for c in permission_diff(before, after) if c.area == "delegation"]
    assert [(c.risk, c.text) for c in changes] == [("widening", "+ may call agent mailer")]
    assert risk_score(changes) == 10
    assert [c.text for c in permission_diff(after, before)] == ["− may call agent mailer"]
