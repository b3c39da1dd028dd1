"""Fingerprints of MCP primitives: what an approver approved when they approved one.

A tool is everything the model or the client reads about it: its name, title, description,
annotations (`readOnlyHint` and the rest), input schema and output schema. A server that changes
any of them after approval (the "rug pull") offers a different tool under the same name. Prompts,
resources and resource templates are fingerprinted the same way, from what their listing says.
The control plane compares fingerprints and the proxy recomputes them from what the upstream
lists, so both sides share this module. Pure Python, no MCP SDK needed.

Fingerprints are versioned. Version 2 (this one) is written `v2:<64 hex digits>`. Version 1,
a bare 64-hex SHA-256 of the description and input schema only, is what specs approved before
version 2 pin; `matches` still honours one, but only for a tool whose title, annotations and
output schema are all empty (the only tools whose whole face version 1 saw). Any other tool
pinned by a version-1 fingerprint counts as changed until an owner re-pins it with the
fingerprints `agentctl mcp-observe` prints.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from agentgov.entries import canonical_json

FINGERPRINT_VERSION = 2
PREFIX = f"v{FINGERPRINT_VERSION}:"
FINGERPRINT_LENGTH = 64  # hex SHA-256 (after the version prefix)
# MCP's primitives as `mcp_servers` entries name them, and the field that identifies each.
PRIMITIVES = {"tools": "name", "prompts": "name", "resources": "uri",
              "resource_templates": "uri_template"}


def _sha256(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(dict(payload)).encode()).hexdigest()


def _mapping(value: Any) -> dict[str, Any]:
    """A schema or annotations object as a plain dict without nulls: servers spell "nothing"
    as a missing key, null or {} and none of them changes what the model is told."""
    if value is None:
        return {}
    if hasattr(value, "model_dump"):  # an SDK object (ToolAnnotations, Annotations)
        value = value.model_dump(exclude_none=True, by_alias=True)
    return {str(k): v for k, v in dict(value).items() if v is not None}


def tool_fingerprint_v1(description: str | None, input_schema: Mapping[str, Any] | None) -> str:
    """Version 1 (no prefix): hex SHA-256 of the canonical description and input schema only.

    Kept to read specs approved before version 2; never printed for pinning any more."""
    return _sha256({"description": description or "", "input_schema": dict(input_schema or {})})


def tool_fingerprint(name: str, *, title: str | None = None, description: str | None = None,
                     annotations: Any = None, input_schema: Mapping[str, Any] | None = None,
                     output_schema: Mapping[str, Any] | None = None) -> str:
    """Version 2: `v2:` and the hex SHA-256 of the canonical JSON of every part of the tool
    a model or client reads. Missing and empty parts fingerprint alike."""
    return PREFIX + _sha256({
        "kind": "tool", "name": name, "title": title or "", "description": description or "",
        "annotations": _mapping(annotations), "input_schema": _mapping(input_schema),
        "output_schema": _mapping(output_schema)})


def prompt_fingerprint(name: str, *, title: str | None = None, description: str | None = None,
                       arguments: list[Mapping[str, Any]] | None = None) -> str:
    """A prompt as listed: name, title, description and each argument (name, title,
    description, required), in the server's order (the order is shown to the user)."""
    return PREFIX + _sha256({
        "kind": "prompt", "name": name, "title": title or "", "description": description or "",
        "arguments": [_mapping(argument) for argument in arguments or []]})


def resource_fingerprint(uri: str, *, name: str | None = None, title: str | None = None,
                         description: str | None = None, mime_type: str | None = None,
                         annotations: Any = None, template: bool = False) -> str:
    """A resource (or, with `template`, a resource template whose `uri` is the template) as
    listed: its address, name, title, description, MIME type and annotations. The content a
    read returns is not part of it: a resource's content is data that changes by design."""
    return PREFIX + _sha256({
        "kind": "resource_template" if template else "resource", "uri": uri, "name": name or "",
        "title": title or "", "description": description or "", "mime_type": mime_type or "",
        "annotations": _mapping(annotations)})


def version(fingerprint: str) -> int:
    """The version a fingerprint was written in (1 for a bare SHA-256)."""
    return FINGERPRINT_VERSION if fingerprint.startswith(PREFIX) else 1


def matches(pinned: str, face: Mapping[str, Any]) -> bool:
    """Whether the fingerprint an approver pinned approves `face` (an offered primitive with
    its version-2 `fingerprint`). A version-1 pin approves a tool only when its title,
    annotations and output schema are empty and its description and input schema hash alike."""
    if version(pinned) == FINGERPRINT_VERSION:
        return pinned == face.get("fingerprint")
    if face.get("title") or face.get("annotations") or face.get("output_schema"):
        return False
    return "input_schema" in face and pinned == tool_fingerprint_v1(
        face.get("description"), face.get("input_schema"))
