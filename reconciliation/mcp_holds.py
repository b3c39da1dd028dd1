"""MCP primitives an open finding holds back from a governed proxy.

A rug-pulled tool (prompt, resource, resource template) is hidden by the proxy because its
fingerprint no longer matches the approved one. When the server reverts it, the fingerprint
matches again, but the finding about the change is still an approver's to close: until then the
proxy must not serve it. The desired-state response lists these holds; the proxy reads them."""

from typing import Any

from config import pointers
from reconciliation.choices import OPEN_STATUSES
from reconciliation.models import Finding
from reconciliation.reconciler.diff import MCP_CHANGED_KINDS, MCP_PRIMITIVES
from registry.models import Agent


def _segments(pointer: str) -> list[str]:
    return pointers.tokens(pointer)


def held_mcp(agent: Agent) -> list[dict[str, Any]]:
    """Each MCP primitive of `agent` with an open finding about a change to it, as
    {server, primitive, name, finding, status}, sorted (one per primitive: the newest)."""
    held: dict[tuple[str, str, str], dict[str, Any]] = {}
    rows = (Finding.objects.filter(agent=agent, kind__in=sorted(MCP_CHANGED_KINDS),
                                   status__in=OPEN_STATUSES)
            .order_by("pk").values("pk", "pointer", "status"))
    for row in rows:
        parts = _segments(row["pointer"])
        if len(parts) != 4 or parts[0] != "mcp_servers" or parts[2] not in MCP_PRIMITIVES:
            continue
        held[(parts[1], parts[2], parts[3])] = {
            "server": parts[1], "primitive": parts[2], "name": parts[3],
            "finding": row["pk"], "status": row["status"]}
    return [held[key] for key in sorted(held)]
