"""`agentctl mcp-observe` and `agentctl mcp-proxy`: MCP servers as observed and enforced state.

Both need the `mcp` extra; without it they say how to install it instead of failing on import."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from agentgov.errors import NotFound

if TYPE_CHECKING:
    from agentgov.client import Client

INSTALL_HINT = "the MCP commands need the mcp extra: pip install 'agentgov-client[mcp]'"


def _proxy_module() -> Any:
    try:
        from agentgov import mcp_proxy
    except ImportError as error:  # the optional extra is not installed
        raise RuntimeError(f"{INSTALL_HINT} ({error})") from None
    return mcp_proxy


def _approved_servers(client: Client, agent: str) -> list[dict[str, Any]]:
    try:
        return list(client.desired_state(agent).spec.get("mcp_servers", []))
    except NotFound:  # not approved yet: nothing to compare with
        return []


def _status(approved: dict[str, Any] | None, tool: dict[str, str]) -> str:
    pinned = {t["name"]: t["fingerprint"] for t in (approved or {}).get("tools", [])}
    if tool["name"] not in pinned:
        return "not approved"
    return "approved" if pinned[tool["name"]] == tool["fingerprint"] else "CHANGED"


def cmd_mcp_observe(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    """List each MCP server's tools with fingerprints; with --report, report them as the
    agent's observed state. Exit 1 when a tool is not approved as offered."""
    proxy = _proxy_module()
    approved = {server["name"]: server for server in _approved_servers(client, args.agent)}
    if args.upstream:
        upstream = proxy.Upstream(args.upstream)
        targets = [(args.server or "upstream", upstream)]
    else:
        targets = [(name, proxy.Upstream(server.get("url") or server["command"]))
                   for name, server in approved.items()]
    if not targets:
        raise RuntimeError(f"{args.agent} approves no MCP servers: name one with --upstream")
    observed, differs = [], False
    for name, upstream in targets:
        tools = proxy.anyio.run(proxy.list_upstream_tools, upstream)
        observed.append({**upstream.spec_entry(name), "tools": tools})
        for tool in tools:
            status = _status(approved.get(name), tool)
            differs |= status != "approved"
            if args.output == "table":
                out.write(f"{name}/{tool['name']}   {tool['fingerprint']}   {status}\n")
    if args.output == "json":
        json.dump(observed, out, indent=2, ensure_ascii=False)
        out.write("\n")
    if args.report:
        client.report_observed_part("mcp_servers", observed, args.agent)
    return 1 if differs else 0


def cmd_mcp_proxy(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    """Serve the governed proxy until interrupted."""
    _proxy_module().serve(client, agent=args.agent, upstream=args.upstream, server=args.server,
                          host=args.host, port=args.port, interval=args.interval,
                          decision_wait=args.decision_wait)
    return 0


def add_mcp_commands(verbs: Any) -> None:
    """Wire the two MCP verbs into agentctl's parser."""
    observe = verbs.add_parser(
        "mcp-observe", help="list MCP servers' tools with fingerprints (needs the mcp extra)",
        description="Lists each approved MCP server of the agent (or --upstream) with every "
                    "tool's fingerprint and whether it is approved as offered; -o json prints "
                    "manifest-ready mcp_servers entries. Exit 1 when something is not approved.")
    observe.add_argument("--agent", required=True)
    observe.add_argument("--upstream", help="a streamable-HTTP URL or a stdio command line")
    observe.add_argument("--server", help="the server's name in the manifest (with --upstream)")
    observe.add_argument("--report", action="store_true",
                         help="report the tools as the agent's observed mcp_servers")
    observe.add_argument("-o", "--output", choices=["table", "json"], default="table")
    observe.set_defaults(run=cmd_mcp_observe)

    proxy = verbs.add_parser(
        "mcp-proxy", help="serve the governed MCP proxy in front of one server (mcp extra)",
        description="The agent connects here instead of to the server: only approved tools "
                    "with approved fingerprints are listed, other calls are refused, sign-off "
                    "rules ask for a runtime decision, each call is a behaviour event, and the "
                    "upstream's tools are reported as observed state. Stdio unless --port.")
    proxy.add_argument("--agent", required=True)
    proxy.add_argument("--upstream", required=True,
                       help="a streamable-HTTP URL or a stdio command line")
    proxy.add_argument("--server", help="the server's name in the manifest (default: the "
                                        "approved server reached at --upstream)")
    proxy.add_argument("--host", default="127.0.0.1")
    proxy.add_argument("--port", type=int, help="serve streamable HTTP at /mcp on this port")
    proxy.add_argument("--interval", type=float, default=5.0,
                       help="seconds between desired-state and upstream checks (default 5)")
    proxy.add_argument("--decision-wait", type=float, default=300.0,
                       help="seconds to wait for a human's sign-off (default 300)")
    proxy.set_defaults(run=cmd_mcp_proxy)
