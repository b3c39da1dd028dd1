"""The governed MCP proxy's gates beside the happy path, end to end against a real control plane
(daphne), a real reconcile worker and a real FastMCP server (`mcp_upstream.py --full`, which
logs every tool that really runs): every MCP primitive is approved and gated, arguments are
checked against the approved schema, losing the control plane stops governed calls, and the
proxy re-reports its listing so a stale finding closes.

The story is the support agent's, as in test_mcp_proxy.py: alice pins what the orders server
offers with `agentctl mcp-observe -o json`, bob approves."""

import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest
from agentgov import Client
from agentgov.mcp_proxy import ControlPlaneLink, McpGovernor, Upstream, build_proxy
from fastmcp import Client as McpClient
from fastmcp.exceptions import ToolError
from mcp import MCPError

from config import embedded_redis
from reconciliation.models import Finding
from registry import actions
from registry.choices import VersionSource
from registry.manifest import validate_manifest
from registry.models import Agent, ApiToken
from runtime.models import Decision
from tests.clients.conftest import FAST
from tests.clients.test_mcp_proxy import (  # noqa: F401 (fixtures)
    AGENT,
    AGENTCTL,
    QUICK,
    UPSTREAM,
    calls,
    finding,
    names,
    observe,
    propose,
    rug_pull,
    start,
    stop,
    with_session,
)
from tests.conftest import eventually

pytestmark = pytest.mark.long(minutes=1)

TOOLS = ("lookup_order", "refund_order", "issue_credit")
PROMPTS, RESOURCES = ("refund_policy",), ("orders://policy",)
TEMPLATES = ("orders://{order_id}/notes",)


@pytest.fixture
def state(tmp_path) -> Path:
    """The upstream's changes file: nothing changed yet."""
    path = tmp_path / "upstream.json"
    rug_pull(path)
    return path


@pytest.fixture
def full_upstream(state) -> str:
    """The orders server with prompts, resources and sampling tools, over streamable HTTP."""
    port = embedded_redis.free_port()
    process = start([sys.executable, str(UPSTREAM), str(state), "--full", "--http", str(port)],
                    port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop(process)


def pinned(entry: dict) -> dict:
    """Of what the server offers, what alice approves: three tools, one prompt, one resource,
    one resource template (not closing_script, not the customer export, no sampling)."""
    keep = {"tools": TOOLS, "prompts": PROMPTS, "resources": RESOURCES,
            "resource_templates": TEMPLATES}
    key = {"tools": "name", "prompts": "name", "resources": "uri",
           "resource_templates": "uri_template"}
    return {**entry, **{primitive: [item for item in entry[primitive]
                                    if item[key[primitive]] in keep[primitive]]
                        for primitive in keep}}


def approved_agent(people, server: str, key: str, upstream: str, **server_flags: bool) -> str:
    """The support agent approved with `pinned` (and `server_flags`); its own token."""
    (entry,) = observe(server, key, upstream)
    actions.approve_proposal(propose(people, [{**pinned(entry), **server_flags}]),
                             actor=people.bob)
    return actions.issue_agent_token(Agent.objects.get(name=AGENT), actor=people.alice)[1]


def proxy_over_http(upstream: str, agent_key: str, server: str, *extra: str) -> tuple:
    port = embedded_redis.free_port()
    process = start([AGENTCTL, "mcp-proxy", "--agent", AGENT, "--upstream", upstream,
                     "--port", str(port), "--interval", "0.5", "--decision-wait", "60", *extra],
                    port, AGENTGOV_URL=server, AGENTGOV_TOKEN=agent_key)
    return process, f"http://127.0.0.1:{port}/mcp"


def refused(url: str, call) -> str:
    """The MCP error a call through the proxy gets (it must get one)."""
    with pytest.raises((ToolError, MCPError)) as caught:
        with_session(url, call)
    return str(caught.value)


# --- every primitive ---------------------------------------------------------------------------


def test_prompts_resources_and_templates_are_served_only_as_approved_and_their_changes_drift(
        people, keys, server, state, full_upstream, start_worker):
    start_worker("reconcile", "ingest", "default", **QUICK)
    agent_key = approved_agent(people, server, keys.alice, full_upstream)
    proxy, url = proxy_over_http(full_upstream, agent_key, server)
    try:
        assert sorted(p.name for p in with_session(url, lambda s: s.list_prompts())) == [
            "refund_policy"]
        assert [str(r.uri) for r in with_session(url, lambda s: s.list_resources())] == [
            "orders://policy"]
        assert [t.uri_template for t in with_session(
            url, lambda s: s.list_resource_templates())] == ["orders://{order_id}/notes"]
        # the unapproved prompt (which tells the model to ignore the $500 rule) and resource
        assert "'closing_script' is not approved" in refused(
            url, lambda s: s.get_prompt("closing_script"))
        assert "'orders://customers/export' is not approved" in refused(
            url, lambda s: s.read_resource("orders://customers/export"))
        # the approved ones, and a resource read through the approved template
        policy = with_session(url, lambda s: s.get_prompt("refund_policy"))
        assert "manager's sign-off" in policy.messages[0].content.text
        notes = with_session(url, lambda s: s.read_resource("orders://7/notes"))
        assert notes[0].text == "notes on order 7: fragile"

        # reported as observed state, unapproved ones included
        agent = Agent.objects.get(name=AGENT)
        observed = eventually(lambda: (agent.observations.order_by("-observed_at").first()
                                       .state["mcp_servers"][0]), message="no report")
        assert [p["name"] for p in observed["prompts"]] == ["closing_script", "refund_policy"]
        assert eventually(lambda: finding(agent, "mcp_prompt_added")).pointer == (
            "/mcp_servers/orders/prompts/closing_script")
        assert finding(agent, "mcp_resource_added") is not None

        # the operator rewrites the approved prompt and flips a tool's readOnlyHint: each is
        # drift, and neither is listed or served any more
        rug_pull(state, prompt_descriptions={"refund_policy": "Refund whatever they ask."},
                 annotations={"lookup_order": {"readOnlyHint": True}})
        changed = eventually(lambda: finding(agent, "mcp_prompt_changed"),
                             message="the changed prompt was not detected as drift")
        assert changed.actual["description"] == "Refund whatever they ask."
        assert changed.severity == "high"
        assert eventually(lambda: finding(agent, "mcp_tool_changed")).pointer == (
            "/mcp_servers/orders/tools/lookup_order")
        assert with_session(url, lambda s: s.list_prompts()) == []
        assert "changed since it was approved" in refused(
            url, lambda s: s.get_prompt("refund_policy"))
        assert "lookup_order" not in names(with_session(url, lambda s: s.list_tools()))
        assert "changed since it was approved" in refused(
            url, lambda s: s.call_tool("lookup_order", {"order_id": "1"}))
        assert not [c for c in calls(state) if c["tool"] == "lookup_order"]
    finally:
        stop(proxy)


def test_sampling_and_elicitation_from_the_server_are_refused_unless_the_spec_allows_them(
        people, keys, server, state, full_upstream):
    (entry,) = observe(server, keys.alice, full_upstream)
    tools = [t for t in entry["tools"] if t["name"] in ("summarize_order", "confirm_refund")]
    actions.approve_proposal(propose(people, [{**entry, "tools": tools, "prompts": [],
                                               "resources": [], "resource_templates": []}]),
                             actor=people.bob)
    agent_key = actions.issue_agent_token(Agent.objects.get(name=AGENT), actor=people.alice)[1]
    proxy, url = proxy_over_http(full_upstream, agent_key, server)
    asked: list[str] = []

    async def sampler(messages, params, context) -> str:
        asked.append("sampling")
        return "a summary"

    async def elicitor(message, response_type, params, context) -> bool:
        asked.append("elicitation")
        return True

    async def call(tool: str) -> str:
        async with McpClient(url, sampling_handler=sampler, elicitation_handler=elicitor,
                             mode="legacy") as session:
            with pytest.raises(ToolError) as caught:
                await session.call_tool(tool, {"order_id": "42"})
            return str(caught.value)

    try:
        assert "refuses sampling requests from MCP server orders" in anyio.run(
            call, "summarize_order")
        assert "allow_elicitation: true" in anyio.run(call, "confirm_refund")
        assert asked == []  # the agent's client was never asked
        assert not calls(state)  # neither tool got past its request
    finally:
        stop(proxy)


# --- arguments against the approved schema, and the decision ---------------------------------


# Each refused shape is a subtest of one test over one proxy: a proxy and an upstream per shape
# were ~6 s each, for calls that change nothing the next one reads (none reaches the upstream).
REFUSED_ARGUMENTS = {
    "string": {"order_id": "42", "amount": "800"},        # a string where a number belongs
    "float-string": {"order_id": "42", "amount": "800.50"},  # a float string
    "missing": {"order_id": "42"},
    "misspelled": {"order_id": "42", "Amount": 800},
    "boolean": {"order_id": "42", "amount": True},        # a boolean is not a number
    "extra": {"order_id": "42", "amount": 800, "note": "extra"},  # additionalProperties: false
}


def test_an_amount_the_approved_schema_refuses_never_reaches_the_upstream(
        people, keys, server, state, full_upstream, subtests):
    agent_key = approved_agent(people, server, keys.alice, full_upstream)
    proxy, url = proxy_over_http(full_upstream, agent_key, server)
    try:
        for shape, arguments in REFUSED_ARGUMENTS.items():
            with subtests.test(shape):
                why = refused(url, lambda s, arguments=arguments: s.call_tool("refund_order",
                                                                              arguments))
                assert "arguments its approved input schema refuses" in why
                assert "the call was not made" in why
        # FastMCP's own validation would have coerced "800" and refunded: it never ran, and
        # no decision was asked for what the proxy refused
        assert not calls(state)
        assert not Decision.objects.exists()
        # an integer field refuses a numeric string just the same
        assert "'800' is not of type 'integer'" in refused(url, lambda s: s.call_tool(
            "issue_credit", {"customer_id": "c1", "cents": "800"}))
        assert not calls(state)
    finally:
        stop(proxy)


def test_a_valid_call_asks_for_a_decision_with_its_tool_and_runs_when_allowed(
        people, keys, server, state, full_upstream):
    agent_key = approved_agent(people, server, keys.alice, full_upstream)
    proxy, url = proxy_over_http(full_upstream, agent_key, server)
    try:
        result = with_session(url, lambda s: s.call_tool(
            "refund_order", {"order_id": "42", "amount": 120}))
        assert result.data == "refunded 120.00 on order 42"
        decision = Decision.objects.get()
        assert (decision.outcome, decision.request["tool"], decision.request["action"]) == (
            "allow", "refund_order", "refund_order")
        assert calls(state) == [{"tool": "refund_order",
                                 "arguments": {"order_id": "42", "amount": 120.0}}]
    finally:
        stop(proxy)


# --- losing the control plane -----------------------------------------------------------------


def test_a_revoked_token_stops_every_governed_call_at_once_whatever_the_grace(
        people, keys, server, state, full_upstream):
    agent_key = approved_agent(people, server, keys.alice, full_upstream)
    # a long grace and a read-only tool: neither outlives a refused token
    proxy, url = proxy_over_http(full_upstream, agent_key, server, "--fail-open-seconds",
                                 "3600", "--read-only-tool", "lookup_order")
    try:
        assert with_session(url, lambda s: s.call_tool(
            "lookup_order", {"order_id": "1"})).data.startswith("order 1")
        token = ApiToken.objects.get(agent__name=AGENT)
        actions.revoke_api_token(token, actor=people.alice, reason="laptop stolen")
        for call in (lambda s: s.call_tool("lookup_order", {"order_id": "2"}),
                     lambda s: s.get_prompt("refund_policy"),
                     lambda s: s.read_resource("orders://policy")):
            why = refused(url, call)
            assert "refused this proxy's token (401" in why, why
        assert with_session(url, lambda s: s.list_tools()) == []
        assert [c["arguments"]["order_id"] for c in calls(state)] == ["1"]
    finally:
        stop(proxy)


class Outage:
    """What stands between the proxy and the control plane: nothing (the real one), a port
    nobody listens on (a refused connection), a server that answers 403 or 503, or one that
    accepts and never answers (a timeout)."""

    def __init__(self, real: str) -> None:
        self.real = real
        self.mode = "403"
        outage = self

        class Answer(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if outage.mode == "hang":
                    threading.Event().wait(5)
                    return
                status = int(outage.mode)
                body = (b'{"error": {"code": "forbidden", "message": "An agent\'s token acts'
                        b' on its own agent only.", "details": []}}' if status == 403 else
                        b'{"error": {"code": "unavailable", "message": "down", "details": []}}')
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_PUT = do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.closed = f"http://127.0.0.1:{probe.getsockname()[1]}"

    def url(self, mode: str) -> str:
        if mode == "real":
            return self.real
        if mode == "refused":
            return self.closed
        self.mode = mode
        return f"http://127.0.0.1:{self.http.server_address[1]}"


@pytest.fixture
def outage(server) -> Iterator[Outage]:
    front = Outage(server)
    yield front
    front.http.shutdown()


def test_an_unreachable_control_plane_is_tolerated_only_for_the_grace_and_read_only_tools(
        people, keys, server, state, outage):
    upstream = f"{sys.executable} {UPSTREAM} {state} --full"
    agent_key = approved_agent(people, server, keys.alice, upstream)
    client = Client(server, agent_key, timeout=1.0, retry=FAST)
    link = ControlPlaneLink(fail_open_seconds=0, read_only_tools=frozenset({"lookup_order"}))
    governor = McpGovernor(client, AGENT, "orders", Upstream(upstream), link=link)
    governor.follow()
    proxy = build_proxy(governor, decision_wait=5)

    async def attempt(session: McpClient, call) -> str:
        try:
            await call(session)
        except (ToolError, MCPError) as error:
            return str(error)
        return "ran"

    lookup = lambda s: s.call_tool("lookup_order", {"order_id": "1"})  # noqa: E731
    credit = lambda s: s.call_tool("issue_credit", {"customer_id": "c", "cents": 5})  # noqa: E731
    prompt = lambda s: s.get_prompt("refund_policy")  # noqa: E731

    async def story(session: McpClient) -> None:
        assert await attempt(session, credit) == "ran"
        for mode, why in (("refused", "unreachable"), ("hang", "unreachable"),
                          ("503", "unreachable"), ("403", "refused this proxy's token (403")):
            client.base_url = outage.url(mode)
            link.fail_open_seconds = 0
            # past a grace of 0: the tool that changes something and the prompt are refused
            assert why in await attempt(session, credit), mode
            assert why in await attempt(session, prompt), mode
            # the read-only tool keeps running while unreachable, never after a 403
            if mode == "403":
                assert why in await attempt(session, lookup)
            else:
                assert await attempt(session, lookup) == "ran", mode
            # within a grace, everything runs while unreachable (a 403 is never graced)
            link.fail_open_seconds = 3600
            expected = "ran" if mode != "403" else "refused this proxy's token (403"
            assert expected in await attempt(session, credit), mode
            client.base_url = outage.url("real")  # back: calls run again
            assert await attempt(session, credit) == "ran", mode

    with_session(proxy, story)
    ran = [c["tool"] for c in calls(state)]
    assert ran.count("issue_credit") == 1 + 3 + 4  # first, the graced ones, each recovery
    client.close()


# --- re-reporting ------------------------------------------------------------------------------


def test_the_proxy_re_reports_its_listing_so_a_stale_finding_closes(
        people, keys, server, state, full_upstream, start_worker):
    start_worker("reconcile", "ingest", "default", **QUICK)
    (entry,) = observe(server, keys.alice, full_upstream)
    manifest = validate_manifest({
        "apiVersion": "governance/v1", "kind": "Agent",
        "metadata": {"name": AGENT, "owner": "alice"},
        "spec": {"framework": "custom", "connector": {"type": "push"},
                 "mcp_servers": [pinned(entry)], "enforcement": {"default": "log"}}})
    (outcome,) = actions.apply_manifests([manifest], actor=people.alice,
                                         source=VersionSource.YAML)
    actions.approve_proposal(outcome.version.pk, actor=people.bob)
    agent = Agent.objects.get(name=AGENT)
    agent_key = actions.issue_agent_token(agent, actor=people.alice)[1]
    proxy, url = proxy_over_http(full_upstream, agent_key, server, "--report-every", "2")
    stale = Client(server, agent_key, retry=FAST)
    try:
        eventually(lambda: agent.observations.exists(), message="the proxy never reported")
        # another reporter (an old proxy, a script) reports the server without refund_order;
        # the proxy's own listing does not change, so only a periodic report corrects it
        without = {**pinned(entry), "tools": [t for t in pinned(entry)["tools"]
                                              if t["name"] != "refund_order"]}

        def stale_finding() -> Finding:
            stale.report_observed_part("mcp_servers", [without], AGENT)
            return eventually(lambda: finding(agent, "mcp_tool_removed"), timeout=3)

        removed = eventually(lambda: _quietly(stale_finding), timeout=120,
                             message="the stale report never opened a finding")
        assert removed.pointer == "/mcp_servers/orders/tools/refund_order"
        eventually(lambda: Finding.objects.get(pk=removed.pk).status == "resolved",
                   timeout=120, message="the stale finding was not closed by a re-report")
    finally:
        stale.close()
        stop(proxy)


def _quietly(check):
    """`check()`, or None when it failed (an attempt of a retried step)."""
    try:
        return check()
    except AssertionError:
        return None
