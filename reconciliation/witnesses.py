"""Two witnesses: what the agent reports about its own access, and what the system that grants
it (a permission source) says. Pure Python.

For each resource a source covers, the source is the witness of record: its access replaces
whatever the agent reported for that resource (in `data` and in `grants`), and each such
resource keeps both accounts, so a finding says which witness saw what. The same holds for each
tool a source covers (an IAM role allowed what the tool needs): the tool is in `tools` when the
source says the role is allowed any of it ("allowed" or "partial"), whatever the agent listed."""

from collections.abc import Mapping
from typing import Any

from reconciliation.reconciler.diff import json_pointer

AGENT_WITNESS = "agent"
TOOL_SAID = {"allowed": "allowed it", "partial": "allowed part of what it needs",
             None: "not allowed it"}


def _held(state: Mapping[str, Any], resource: str) -> list[str]:
    """Every access level the agent reports on `resource` (data and grants)."""
    return sorted({str(entry.get("access")) for key in ("data", "grants")
                   for entry in state.get(key) or [] if isinstance(entry, dict)
                   and entry.get("resource") == resource})


def witness(reported: Mapping[str, Any], readings: Mapping[str, Mapping[str, str | None]],
            tools: Mapping[str, Mapping[str, str | None]] | None = None
            ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The observed state to judge (the sources' access, and their tools, win on what they
    cover) and, by the pointer a data or tool finding carries, what each witness saw there.
    `tools` is, by source, each covered tool's reading ("allowed", "partial" or None)."""
    covered = {resource: source for source, access in readings.items() for resource in access}
    state = dict(reported)
    for key in ("data", "grants"):
        if key in state or key == "data":
            state[key] = [entry for entry in state.get(key) or []
                          if not (isinstance(entry, dict) and entry.get("resource") in covered)]
    witnesses: dict[str, dict[str, Any]] = {}
    for resource, source in sorted(covered.items()):
        access = readings[source][resource]
        if access is not None:
            state["data"].append({"resource": resource, "access": access})
        agent_said = _held(reported, resource)
        witnesses[json_pointer("data", resource)] = {
            AGENT_WITNESS: agent_said[-1] if len(agent_said) == 1 else (agent_said or None),
            source: access, "of_record": source,
            "agree": agent_said == ([access] if access else [])}
    state["data"] = sorted(state["data"], key=lambda e: str(e.get("resource")))
    if not state.get("grants"):
        state.pop("grants", None)
    _witness_tools(reported, tools or {}, state, witnesses)
    return state, witnesses


def _witness_tools(reported: Mapping[str, Any], readings: Mapping[str, Mapping[str, str | None]],
                   state: dict[str, Any], witnesses: dict[str, dict[str, Any]]) -> None:
    covered = {tool: source for source, held in readings.items() for tool in held}
    if not covered:
        return
    listed = reported.get("tools")
    listed = list(listed) if isinstance(listed, list | tuple) else []
    state["tools"] = [tool for tool in listed if not (isinstance(tool, str) and tool in covered)]
    for tool, source in sorted(covered.items()):
        held = readings[source][tool]
        if held is not None:  # allowed any of what it needs: more than nothing
            state["tools"].append(tool)
        agent_said = "listed" if any(tool == entry for entry in listed) else None
        witnesses[json_pointer("tools", tool)] = {
            AGENT_WITNESS: agent_said, source: held, "of_record": source, "tool_name": tool,
            "agree": (agent_said is None) == (held is None)}
    state["tools"] = sorted(state["tools"], key=str)


def said(entry: Mapping[str, Any]) -> str:
    """One line for people: who saw what, and which witness the loop believed."""
    source = entry["of_record"]
    agent = entry[AGENT_WITNESS]
    if "tool_name" in entry:  # (a source name has no "_")
        tool, held = entry["tool_name"], entry[source]
        return (f"the agent {'listed' if agent else 'did not list'} tool {tool}; {source} "
                f"(the source of record) says its role is {TOOL_SAID.get(held, held)}")
    if isinstance(agent, list):  # it reported the resource twice (data and a grant)
        agent = " and ".join(agent)
    return (f"the agent reported {agent or 'no access'}; {source} (the source of record) "
            f"says {entry[source] or 'no access'}")
