"""The fingerprint of an MCP tool: what an approver approved when they approved the tool.

A tool is what its description and input schema tell the model; a server that changes either
after approval (the "rug pull") offers a different tool under the same name. The control plane
compares fingerprints and the proxy recomputes them from what the upstream lists, so both
sides share this one function. Pure Python, no MCP SDK needed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from agentgov.entries import canonical_json

FINGERPRINT_LENGTH = 64  # hex SHA-256


def tool_fingerprint(description: str | None, input_schema: Mapping[str, Any] | None) -> str:
    """Hex SHA-256 of the canonical JSON of the tool's description and input schema.

    A missing description and an empty one fingerprint alike, as do a missing schema and `{}`:
    MCP servers spell "nothing" both ways and neither changes what the model is told."""
    payload = {"description": description or "", "input_schema": dict(input_schema or {})}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()
