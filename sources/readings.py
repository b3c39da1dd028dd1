"""What each source of record last read of an agent's grants, for the API and the agent page:
`known`, or `unknown` (the source is down: its last known state, never a guess)."""

from typing import Any

from reconciliation.connectors.witnessed import sources_for
from registry.models import Agent
from sources.models import SourceReading


def readings_for(agent: Agent) -> list[dict[str, Any]]:
    """One entry per source the agent is bound to, read or not yet."""
    sources = sources_for(agent)
    if not sources:
        return []  # bound to no source: nothing to read
    readings = {r.source: r for r in SourceReading.objects.filter(agent=agent)}
    shown = []
    for source in sources:
        reading = readings.get(source.name) or SourceReading(
            agent=agent, source=source.name, role=source.role_of(agent.name) or "",
            access=dict.fromkeys(sorted(source.covers)),
            tools=dict.fromkeys(sorted(source.covers_tools)), error="not read yet")
        shown.append({**reading.to_dict(), "type": source.type})
    return shown
