"""MCP servers in the manifest: validated like the rest of the spec, and a new server, tool or
fingerprint reads as widening to the approver."""

import pytest

from registry.manifest import ManifestError, canonicalize, spec_hash
from registry.permission_diff import Risk, permission_diff, risk_score

LOOKUP = {"name": "lookup_order", "fingerprint": "a" * 64, "description": "Look up an order."}
ORDERS = {"name": "orders", "transport": "http", "url": "http://127.0.0.1:8765/mcp",
          "tools": [LOOKUP]}
BASE = {"framework": "custom", "connector": {"type": "push"}}


def spec(*servers: dict) -> dict:
    return canonicalize({**BASE, "mcp_servers": list(servers)})


def errors(raw: dict) -> dict[str, str]:
    with pytest.raises(ManifestError) as caught:
        canonicalize(raw)
    return {error.pointer: error.message for error in caught.value.errors}


def test_an_approved_server_is_stored_sorted_with_its_pinned_tools():
    files = {"name": "files", "transport": "stdio", "command": "python -m files_server",
             "tools": [{"name": "write", "fingerprint": "c" * 64},
                       {"name": "read", "fingerprint": "b" * 64}]}
    canonical = spec(ORDERS, files)
    assert canonical["mcp_servers"] == [
        {"name": "files", "transport": "stdio", "command": "python -m files_server",
         "tools": [{"name": "read", "fingerprint": "b" * 64},
                   {"name": "write", "fingerprint": "c" * 64}]},
        ORDERS,
    ]


def test_a_spec_without_mcp_servers_keeps_its_canonical_form_and_hash():
    # specs approved before MCP servers were governed must not change their hash
    assert "mcp_servers" not in canonicalize(BASE)
    assert spec_hash({**BASE, "mcp_servers": []}) == spec_hash(BASE)


def test_unknown_fields_wrong_types_and_transport_mismatches_are_named_by_pointer():
    found = errors({**BASE, "mcp_servers": [
        {"name": "orders", "transport": "stdio", "url": "http://x/mcp",
         "tools": [{"name": "lookup", "fingerprint": "not-hex", "colour": "red"}]},
        {"name": "orders", "transport": "http", "url": "ftp://x/mcp"},
        {"name": "bad name!", "transport": "smoke-signal"},
        "orders",
    ]})
    assert found == {
        "/mcp_servers/0/url": "expected no url for transport stdio (it takes command);"
                              " got 'http://x/mcp'",
        "/mcp_servers/0/command": "missing required field 'command' for transport stdio",
        "/mcp_servers/0/tools/0/colour": "unknown field 'colour'; expected one of name,"
                                         " fingerprint, description",
        "/mcp_servers/0/tools/0/fingerprint": (
            "expected a fingerprint: 'v2:' and 64 lowercase hex digits, as `agentctl"
            " mcp-observe` prints it (a tool may keep a bare 64-hex version-1 fingerprint);"
            " got 'not-hex'"),
        "/mcp_servers/1/url": "expected an http or https URL with a host; got 'ftp://x/mcp'",
        "/mcp_servers/2/name": "expected a name of 1 to 128 letters, digits, '_', '.' or '-',"
                               " starting alphanumeric; got 'bad name!'",
        "/mcp_servers/2/transport": "expected one of stdio, http; got 'smoke-signal'",
        "/mcp_servers/3": "expected a mapping; got 'orders'",
    }


def test_a_server_or_tool_named_twice_is_refused():
    twice = {**ORDERS, "tools": [LOOKUP, LOOKUP]}
    assert errors({**BASE, "mcp_servers": [twice, ORDERS]}) == {
        "/mcp_servers/0/tools/1/name": "expected each tool once; got 'lookup_order' again"
                                       " (first at /mcp_servers/0/tools/0)",
        "/mcp_servers/1/name": "expected each MCP server once; got 'orders' again"
                               " (first at /mcp_servers/0)",
    }


def test_a_credential_in_the_server_url_is_refused():
    leaky = {**ORDERS, "url": "https://user:pw@mcp.example.com/mcp"}
    assert errors({**BASE, "mcp_servers": [leaky]}) == {
        "/mcp_servers/0/url": "expected a URL without credentials (name them in secret_env)"}


def test_a_new_server_a_new_tool_and_a_new_fingerprint_are_each_widening():
    before = spec(ORDERS)
    refund = {"name": "refund", "fingerprint": "d" * 64}
    repinned = {**LOOKUP, "fingerprint": "e" * 64}
    files = {"name": "files", "transport": "stdio", "command": "files-server", "tools": []}
    after = spec({**ORDERS, "tools": [repinned, refund]}, files)
    changes = [(c.risk, c.text, c.pointer) for c in permission_diff(before, after)]
    assert changes == [
        (Risk.WIDENING, "+ MCP server files (stdio files-server): no tools", "/mcp_servers/files"),
        (Risk.WIDENING, "MCP tool orders/lookup_order: description or input schema changed"
                        " (aaaaaaaaaaaa → eeeeeeeeeeee)", "/mcp_servers/orders/tools/lookup_order"),
        (Risk.WIDENING, "+ MCP tool orders/refund", "/mcp_servers/orders/tools/refund"),
    ]
    assert risk_score(permission_diff(before, after)) == 30


def test_dropping_a_server_or_tool_is_narrowing_and_moving_one_is_widening():
    before = spec(ORDERS)
    moved = spec({**ORDERS, "url": "https://mcp.elsewhere.example/mcp", "tools": []})
    changes = [(c.risk, c.text) for c in permission_diff(before, moved)]
    assert changes == [
        (Risk.WIDENING, "MCP server orders: http http://127.0.0.1:8765/mcp →"
                        " http https://mcp.elsewhere.example/mcp"),
        (Risk.NARROWING, "− MCP tool orders/lookup_order"),
    ]
    assert [(c.risk, c.text) for c in permission_diff(before, canonicalize(BASE))] == [
        (Risk.NARROWING, "− MCP server orders")]


V2 = "v2:" + "d" * 64


def test_prompts_resources_and_templates_are_pinned_like_tools_and_sorted():
    orders = {**ORDERS, "prompts": [{"name": "refund_policy", "fingerprint": V2}],
              "resources": [{"uri": "orders://policy", "fingerprint": V2},
                            {"uri": "orders://faq", "fingerprint": V2, "description": "FAQ"}],
              "resource_templates": [{"uri_template": "orders://{id}/notes", "fingerprint": V2}],
              "allow_sampling": True, "allow_elicitation": False}
    (server,) = spec(orders)["mcp_servers"]
    assert server == {
        **ORDERS, "prompts": [{"name": "refund_policy", "fingerprint": V2}],
        "resources": [{"uri": "orders://faq", "fingerprint": V2, "description": "FAQ"},
                      {"uri": "orders://policy", "fingerprint": V2}],
        "resource_templates": [{"uri_template": "orders://{id}/notes", "fingerprint": V2}],
        "allow_sampling": True}  # false is the default and not written


def test_a_server_entry_without_the_new_fields_keeps_its_canonical_form_and_hash():
    # specs approved before prompts and resources were governed must keep their hash
    empty = {**ORDERS, "prompts": [], "resources": [], "resource_templates": [],
             "allow_sampling": False, "allow_elicitation": False}
    assert spec(empty) == spec(ORDERS)
    assert spec_hash({**BASE, "mcp_servers": [empty]}) == spec_hash(
        {**BASE, "mcp_servers": [ORDERS]})
    assert set(spec(ORDERS)["mcp_servers"][0]) == {"name", "transport", "url", "tools"}


def test_only_tools_may_keep_a_version_1_fingerprint_and_flags_are_booleans():
    found = errors({**BASE, "mcp_servers": [{
        **ORDERS, "prompts": [{"name": "p", "fingerprint": "a" * 64}],
        "resources": [{"uri": "has space", "fingerprint": V2}, {"name": "r", "fingerprint": V2}],
        "allow_sampling": "yes"}]})
    assert found == {
        "/mcp_servers/0/prompts/0/fingerprint": (
            "expected a fingerprint: 'v2:' and 64 lowercase hex digits, as `agentctl"
            f" mcp-observe` prints it; got '{'a' * 50}'... (64 characters)"),
        "/mcp_servers/0/resources/0/uri": "expected a URI of 1 to 2048 characters without"
                                          " spaces; got 'has space'",
        "/mcp_servers/0/resources/1/name": "unknown field 'name'; expected one of uri,"
                                           " fingerprint, description",
        "/mcp_servers/0/resources/1/uri": "missing required field 'uri'",
        "/mcp_servers/0/allow_sampling": "expected true or false; got 'yes'",
    }
