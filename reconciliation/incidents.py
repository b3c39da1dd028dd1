"""Incidents: the findings one cause produced, decided once.

One bad deployment changes two or three things at once; the pass that sees it opens a finding
(and, where the area escalates, an escalation) for each. They share the agent, the observation
that showed them and the pass that found them, so approvers see and decide them as one incident.
A change the reporter names by its id (a deployment, a platform change: attribution.py) is one
incident wherever it landed: one deployment across five agents is one incident, not five. The
key is this one function.
"""

import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any

IncidentKey = tuple[Any, ...]
# Causes named by an id the reporter sent, shared by every agent the change touched (an agent's
# own report is keyed under its name, "agent:...", so it never joins another agent's).
NAMED_CHANGES = ("deployment:", "change:")


def named_change(cause_key: str | None) -> bool:
    """Whether the cause is a change named by its id (one incident across agents)."""
    return bool(cause_key) and cause_key.startswith(NAMED_CHANGES)


def incident_key(finding: Any) -> IncidentKey:
    """What groups a finding with its siblings: the named change that caused it (on any
    agent), else same agent, same observation that showed it, same pass that found it.
    Behaviour findings stand alone (each is one thing the agent did)."""
    if getattr(finding, "behaviour", False):
        return ("finding", finding.pk)
    if named_change(getattr(finding, "cause_key", None)):
        return ("cause", finding.cause_key)
    observed: datetime | None = finding.observed_at
    return ("pass", finding.agent_id, observed.isoformat() if observed else None,
            finding.detected_at.isoformat())


def incident_filter(finding: Any) -> dict[str, Any]:
    """The findings that share `finding`'s incident, as filter keywords (incident_key's
    fields): the page an incident's alert links to lists them."""
    if getattr(finding, "behaviour", False):
        return {"pk": finding.pk}
    if named_change(finding.cause_key):
        return {"cause_key": finding.cause_key, "behaviour": False}
    return {"agent_id": finding.agent_id, "behaviour": False,
            "observed_at": finding.observed_at, "detected_at": finding.detected_at}


def incident_token(finding: Any) -> str:
    """The incident key as a short opaque string for alerts: browsers fold the toasts of one
    incident into one."""
    return hashlib.sha256(repr(incident_key(finding)).encode()).hexdigest()[:16]


def escalation_key(escalation: Any) -> IncidentKey:
    """An escalation's incident: its finding's, or itself for a runtime decision."""
    if escalation.finding_id is None or escalation.finding is None:
        return ("escalation", escalation.pk)
    return incident_key(escalation.finding)


def group(escalations: Iterable[Any]) -> list[list[Any]]:
    """Escalations grouped into incidents, each group in the order first seen."""
    groups: dict[IncidentKey, list[Any]] = {}
    for escalation in escalations:
        groups.setdefault(escalation_key(escalation), []).append(escalation)
    return list(groups.values())
