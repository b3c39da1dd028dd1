"""Validating a reported actual state: the spec's shape minus enforcement, plus `running`.

Pure Python. Every key is optional (an agent reports what it knows), unknown keys and wrong
types are errors with their JSON pointer, and lists are sorted so equal states hash equally.
"""

import math
from typing import Any

from agentgov.mcp_identity import command_identity, url_identity

from config import pointers

MAX_ITEMS = 1000
NUMBER_LIMIT = 1e12
MAX_DESCRIPTION = 8000
MCP_TOOL_FIELDS = ("name", "fingerprint", "description")
# An MCP server's primitives as reported, and the field naming each (a URI for resources).
MCP_ITEM_KEYS = {"tools": "name", "prompts": "name", "resources": "uri",
                 "resource_templates": "uri_template"}
MAX_URI = 2048


class ObservedStateError(ValueError):
    """The report is not a valid observed state; `errors` are (pointer, message) pairs."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{p}: {m}" for p, m in errors))


def _string(value: Any, pointer: str, errors: list, max_length: int = 256) -> bool:
    if not isinstance(value, str) or not value or len(value) > max_length:
        errors.append((pointer, f"expected a non-empty string of at most {max_length} "
                                f"characters; got {type(value).__name__}"))
        return False
    return True


def _number(value: Any, pointer: str, errors: list) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            isinstance(value, float) and not math.isfinite(value)) or abs(value) > NUMBER_LIMIT:
        errors.append((pointer, "expected a number (or null: not enforced)"))
        return False
    return True


def _entries(value: Any, pointer: str, errors: list, fields: dict[str, str]) -> list[dict]:
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        errors.append((pointer, f"expected a list of at most {MAX_ITEMS} objects"))
        return []
    out = []
    for index, entry in enumerate(value):
        where = f"{pointer}/{index}"
        if not isinstance(entry, dict):
            errors.append((where, "expected an object"))
            continue
        for key in entry:
            if key not in fields:
                errors.append((f"{where}/{key}", f"unknown field; expected one of "
                                                 f"{', '.join(fields)}"))
        for key, kind in fields.items():
            if key not in entry:
                if kind.endswith("!"):
                    errors.append((f"{where}/{key}", "required"))
                continue
            if kind.startswith("str"):
                _string(entry[key], f"{where}/{key}", errors, 2000)
            elif kind.startswith("int") and (isinstance(entry[key], bool) or not isinstance(
                    entry[key], int) or not 0 <= entry[key] <= NUMBER_LIMIT):
                errors.append((f"{where}/{key}", "expected a whole number"))
        out.append(entry)
    return out


def _mcp_item(item: Any, pointer: str, errors: list, key: str = "name") -> dict | None:
    """One observed MCP tool (prompt, resource, resource template): its name (or URI), or
    {name, fingerprint, description} as far as known."""
    if isinstance(item, str):
        return {key: item} if _string(item, pointer, errors, MAX_URI) else None
    if not isinstance(item, dict):
        errors.append((pointer, f"expected a {key} or an object"))
        return None
    fields = (key, "fingerprint", "description")
    unknown = set(item) - set(fields)
    for field in sorted(map(str, unknown)):
        errors.append((f"{pointer}/{field}", f"unknown field; expected one of {', '.join(fields)}"))
    ok = _string(item.get(key), f"{pointer}/{key}", errors, MAX_URI if key != "name" else 256)
    if "fingerprint" in item:
        ok = _string(item["fingerprint"], f"{pointer}/fingerprint", errors, 128) and ok
    description = item.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        errors.append((f"{pointer}/description",
                       f"expected a string of at most {MAX_DESCRIPTION} characters"))
        ok = False
    return dict(item) if ok and not unknown else None


def _mcp_tool(tool: Any, pointer: str, errors: list) -> dict | None:
    """One observed MCP tool: a name, or {name, fingerprint, description} as far as known."""
    return _mcp_item(tool, pointer, errors)


def _mcp_servers(value: Any, pointer: str, errors: list) -> list[dict]:
    """MCP servers the agent reaches and what each offers (tools, and prompts, resources and
    resource templates when the reporter lists them), sorted by name."""
    servers = []
    for index, entry in enumerate(_entries(value, pointer, errors, {
            "name": "str!", "transport": "str", "url": "str", "command": "str",
            "tools": "list", "prompts": "list", "resources": "list",
            "resource_templates": "list"})):
        server = dict(entry)
        for key, identity in (("url", url_identity), ("command", command_identity)):
            if isinstance(server.get(key), str):
                try:  # the one identity every judge compares servers by must read it
                    identity(server[key])
                except ValueError as error:
                    errors.append((f"{pointer}/{index}/{key}",
                                   f"expected an MCP server {key} that can be read: {error}"))
        # a reporter that sees the server but not its tools (a framework adapter): the
        # tools last listed for it (by the MCP proxy) are kept when it is recorded
        for primitive, key in MCP_ITEM_KEYS.items():
            if primitive not in server:
                continue
            where = f"{pointer}/{index}/{primitive}"
            items = server[primitive]
            if not isinstance(items, list) or len(items) > MAX_ITEMS:
                errors.append((where, f"expected a list of at most {MAX_ITEMS} {primitive}"))
                items = []
            checked = [_mcp_item(item, f"{where}/{i}", errors, key)
                       for i, item in enumerate(items)]
            server[primitive] = sorted((t for t in checked if t), key=lambda t, k=key: t[k])
        servers.append(server)
    return sorted(servers, key=lambda server: str(server.get("name")))


def validate_observed(report: Any) -> dict[str, Any]:
    """The report, checked and normalised; raises ObservedStateError listing every problem."""
    errors: list[tuple[str, str]] = []
    if not isinstance(report, dict):
        raise ObservedStateError([("", "expected a JSON object")])
    state: dict[str, Any] = {}
    for key, value in report.items():
        pointer = f"/{key}"
        if key in ("framework", "model", "version"):
            if _string(value, pointer, errors):
                state[key] = value
        elif key == "running":
            if isinstance(value, bool):
                state[key] = value
            else:
                errors.append((pointer, "expected true or false"))
        elif key == "connector":
            if isinstance(value, dict) and isinstance(value.get("type"), str):
                state[key] = value
            else:
                errors.append((pointer, "expected an object with a type"))
        elif key in ("tools", "delegates_to"):
            # delegates_to: agents it calls
            if not isinstance(value, list) or len(value) > MAX_ITEMS:
                errors.append((pointer, f"expected a list of at most {MAX_ITEMS} names"))
                continue
            for index, tool in enumerate(value):
                _string(tool, f"{pointer}/{index}", errors)
            state[key] = sorted({t for t in value if isinstance(t, str)})
        elif key == "data":
            entries = _entries(value, pointer, errors, {"resource": "str!", "access": "str!"})
            state[key] = sorted(entries, key=lambda e: str(e.get("resource")))
        elif key == "grants":
            entries = _entries(value, pointer, errors, {
                "resource": "str!", "access": "str!", "expires_at": "str!", "reason": "str"})
            state[key] = sorted(entries, key=lambda e: (str(e.get("resource")),
                                                        str(e.get("expires_at"))))
        elif key == "limits":
            entries = _entries(value, pointer, errors, {
                "resource": "str!", "max_calls": "int", "max_same_record": "int",
                "per": "str"})
            state[key] = sorted(entries, key=lambda e: (str(e.get("resource")),
                                                        "max_calls" in e))
        elif key == "actions":
            if not isinstance(value, dict) or len(value) > MAX_ITEMS:
                errors.append((pointer, "expected an object of action name to limits"))
                continue
            for name, limits in value.items():
                where = pointers.join(pointer, name)
                if not isinstance(limits, dict) or set(limits) - {"approval_above", "max"}:
                    errors.append((where, "expected an object with approval_above and/or max"))
                    continue
                for field, number in limits.items():
                    _number(number, f"{where}/{field}", errors)
            state[key] = value
        elif key == "mcp_servers":
            state[key] = _mcp_servers(value, pointer, errors)
        else:
            errors.append((pointer, "unknown field; expected framework, connector, model, "
                                    "version, tools, data, actions, limits, grants, running, "
                                    "delegates_to, mcp_servers"))
    if errors:
        raise ObservedStateError(errors)
    return state
