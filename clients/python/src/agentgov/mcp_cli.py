"""`agentctl mcp-observe` and `agentctl mcp-proxy`: MCP servers as observed and enforced state.

Both need the `mcp` extra; without it they say how to install it instead of failing on import."""

from __future__ import annotations

import argparse
import json
import os
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


def _status(proxy: Any, approved: dict[str, Any] | None, primitive: str,
            seen: dict[str, Any]) -> str:
    key = proxy.PRIMITIVES[primitive]
    pinned = {item[key]: item["fingerprint"] for item in (approved or {}).get(primitive, [])}
    if seen[key] not in pinned:
        return "not approved"
    if not proxy.matches(pinned[seen[key]], seen):
        return "CHANGED"
    if proxy.version(pinned[seen[key]]) < proxy.FINGERPRINT_VERSION:
        return "approved (version-1 fingerprint: re-pin with the one printed here)"
    return "approved"


def _manifest_entry(proxy: Any, primitive: str, seen: dict[str, Any]) -> dict[str, str]:
    """A face as `mcp_servers` pins it: identity, version-2 fingerprint, description."""
    key = proxy.PRIMITIVES[primitive]
    return {key: seen[key], "fingerprint": seen["fingerprint"],
            **({"description": seen["description"]} if seen["description"] else {})}


def cmd_mcp_observe(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    """List each MCP server's tools, prompts, resources and resource templates with their
    fingerprints; with --report, report them as the agent's observed state. Exit 1 when
    something is not approved as offered."""
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
    printed, observed, differs = [], [], False
    for name, upstream in targets:
        listing = proxy.anyio.run(proxy.list_upstream, upstream)
        entry, report = upstream.spec_entry(name), upstream.spec_entry(name)
        for primitive, key in proxy.PRIMITIVES.items():
            pins = {item[key]: item["fingerprint"]
                    for item in approved.get(name, {}).get(primitive, [])}
            entry[primitive] = [_manifest_entry(proxy, primitive, seen)
                                for seen in listing[primitive]]
            report[primitive] = [proxy.reported(primitive, seen, pins.get(seen[key]))
                                 for seen in listing[primitive]]
            for seen in listing[primitive]:
                status = _status(proxy, approved.get(name), primitive, seen)
                differs |= not status.startswith("approved")
                if args.output == "table":
                    where = f"{name}/{seen[key]}" if primitive == "tools" else (
                        f"{name}/{primitive}/{seen[key]}")
                    out.write(f"{where}   {seen['fingerprint']}   {status}\n")
            if not entry[primitive] and primitive != "tools":
                del entry[primitive], report[primitive]
        printed.append(entry)
        observed.append(report)
    if args.output == "json":
        json.dump(printed, out, indent=2, ensure_ascii=False)
        out.write("\n")
    if args.report:
        client.report_observed_part("mcp_servers", observed, args.agent)
    return 1 if differs else 0


def cmd_mcp_proxy(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    """Serve the governed proxy until interrupted."""
    _proxy_module().serve(client, agent=args.agent, upstream=args.upstream, server=args.server,
                          host=args.host, port=args.port, interval=args.interval,
                          decision_wait=args.decision_wait,
                          fail_open_seconds=(_env_fail_open() if args.fail_open_seconds is None
                                             else args.fail_open_seconds),
                          read_only_tools=args.read_only_tool, report_every=args.report_every)
    return 0


def add_mcp_commands(verbs: Any) -> None:
    """Wire the two MCP verbs into agentctl's parser."""
    observe = verbs.add_parser(
        "mcp-observe", help="list MCP servers' tools with fingerprints (needs the mcp extra)",
        description="Lists each approved MCP server of the agent (or --upstream) with every "
                    "tool's, prompt's, resource's and resource template's fingerprint and "
                    "whether it is approved as offered; -o json prints "
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
        description="The agent connects here instead of to the server: only approved tools, "
                    "prompts and resources with approved fingerprints are listed, other calls "
                    "are refused, arguments are checked against the approved schema, sign-off "
                    "rules ask for a runtime decision, each call is a behaviour event, and the "
                    "upstream's tools, prompts and resources are reported as observed state. "
                    "Stdio unless --port. See docs/mcp-proxy.md.")
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
    proxy.add_argument("--fail-open-seconds", type=_seconds, default=None,
                       help="how long an unreachable control plane (refused connection, "
                            "timeout, 5xx) is tolerated after the last successful contact "
                            "before governed calls are refused (default: "
                            "AGENTGOV_FAIL_OPEN_SECONDS, else 0); a 401/403 stops them at once")
    proxy.add_argument("--read-only-tool", action="append", default=[], metavar="NAME",
                       help="an approved tool that keeps running while the control plane is "
                            "unreachable past the grace (repeatable; never after a 401/403)")
    proxy.add_argument("--report-every", type=_seconds, default=60.0,
                       help="seconds between reports of the upstream's listing even when it "
                            "did not change (default 60)")
    proxy.set_defaults(run=cmd_mcp_proxy)


def _seconds(text: str) -> float:
    """A non-negative number of seconds (argparse's type: a clear usage error otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds; got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0; got {text!r}")
    return value


def _env_fail_open() -> float:
    """AGENTGOV_FAIL_OPEN_SECONDS, checked as the flag is (a bad value is refused loudly)."""
    text = os.environ.get("AGENTGOV_FAIL_OPEN_SECONDS", "").strip()
    if not text:
        return 0.0
    try:
        return _seconds(text)
    except argparse.ArgumentTypeError as error:
        raise ValueError(f"AGENTGOV_FAIL_OPEN_SECONDS: {error}") from None
