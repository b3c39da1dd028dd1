"""Two witnesses: what the agent reports about its own access, and what the system that grants
it (a permission source) says. Pure Python.

For each resource a source covers, the source is the witness of record: its access replaces
whatever the agent reported for that resource (in `data` and in `grants`), and each such
resource keeps both accounts, so a finding says which witness saw what."""

from collections.abc import Mapping
from typing import Any

from reconciliation.reconciler.diff import json_pointer

AGENT_WITNESS = "agent"


def _held(state: Mapping[str, Any], resource: str) -> list[str]:
    """Every access level the agent reports on `resource` (data and grants)."""
    return sorted({str(entry.get("access")) for key in ("data", "grants")
                   for entry in state.get(key) or [] if isinstance(entry, dict)
                   and entry.get("resource") == resource})


def witness(reported: Mapping[str, Any], readings: Mapping[str, Mapping[str, str | None]]
            ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The observed state to judge (the sources' access wins on what they cover) and, by the
    pointer a data finding carries, what each witness saw there."""
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
    return state, witnesses


def said(entry: Mapping[str, Any]) -> str:
    """One line for people: who saw what, and which witness the loop believed."""
    source = entry["of_record"]
    agent = entry[AGENT_WITNESS]
    if isinstance(agent, list):  # it reported the resource twice (data and a grant)
        agent = " and ".join(agent)
    return (f"the agent reported {agent or 'no access'}; {source} (the source of record) "
            f"says {entry[source] or 'no access'}")
