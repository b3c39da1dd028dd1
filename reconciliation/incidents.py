"""Incidents: the findings one cause produced, decided once.

One bad deployment changes two or three things at once; the pass that sees it opens a finding
(and, where the area escalates, an escalation) for each. They share the agent, the observation
that showed them and the pass that found them, so approvers see and decide them as one incident.
The key is this one function: a recorded cause of drift, once findings carry one, belongs here.
"""

from collections.abc import Iterable
from datetime import datetime
from typing import Any

IncidentKey = tuple[Any, ...]


def incident_key(finding: Any) -> IncidentKey:
    """What groups a finding with its siblings: same agent, same observation (or deployment)
    that showed it, same pass that found it. Behaviour findings stand alone (each is one
    thing the agent did)."""
    if getattr(finding, "behaviour", False):
        return ("finding", finding.pk)
    observed: datetime | None = finding.observed_at
    return ("pass", finding.agent_id, observed.isoformat() if observed else None,
            finding.detected_at.isoformat())


def incident_filter(finding: Any) -> dict[str, Any]:
    """The findings that share `finding`'s incident, as filter keywords (incident_key's
    fields): the page an incident's alert links to lists them."""
    if getattr(finding, "behaviour", False):
        return {"pk": finding.pk}
    return {"agent_id": finding.agent_id, "behaviour": False,
            "observed_at": finding.observed_at, "detected_at": finding.detected_at}


def incident_token(finding: Any) -> str:
    """The incident key as a short opaque string for alerts: browsers fold the toasts of one
    incident into one."""
    import hashlib

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
