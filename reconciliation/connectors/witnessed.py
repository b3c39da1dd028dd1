"""An agent's connector with the permission sources that grant its access beside it.

Observing asks the agent's own connector (push, http, sandbox) and every source bound to the
agent (config/permission_sources.py); on the resources a source covers, the source is the witness of
record (reconciliation/witnesses.py) and `witnesses` keeps both accounts for the findings; so
it is for the tools a source covers (an IAM role allowed what a tool needs). Correcting a covered
resource or tool happens at its source (REVOKE / GRANT, a policy detached there); anything else
goes to the agent's own connector. A source that cannot be read fails the pass: the last known
reading stays, marked unknown, and nothing is corrected on a guess."""

from datetime import datetime
from typing import Any

from django.conf import settings

from config.permission_sources import Source
from reconciliation.connectors.at_source import (
    correct_at_source,
    correct_tool_at_source,
    read_source,
)
from reconciliation.connectors.base import ApplyOutcome, Connector, ConnectorError
from reconciliation.reconciler.diff import OperationKind
from reconciliation.witnesses import witness
from registry.models import Agent


class WitnessedConnector:
    """The agent's connector, with the sources of record for its grants."""

    def __init__(self, inner: Connector, sources: list[Source]) -> None:
        self.inner = inner
        self.name = inner.name
        self.sources = sources
        self.witnesses: dict[str, dict[str, Any]] = {}

    @property
    def last_change(self) -> dict[str, Any] | None:
        return getattr(self.inner, "last_change", None)

    @property
    def observed_at(self) -> datetime | None:
        """When the agent's own report was made (push: read with it)."""
        return getattr(self.inner, "observed_at", None)

    def observe(self, agent: Agent) -> dict[str, Any] | None:
        reported = self.inner.observe(agent)
        read = {source.name: read_source(source, agent) for source in self.sources}
        if reported is None:  # the agent has never reported: nothing to judge yet
            return None
        state, self.witnesses = witness(
            reported, {name: reading.access for name, reading in read.items()},
            {name: reading.tools for name, reading in read.items() if reading.tools})
        return state

    def _source_of(self, resource: str) -> Source | None:
        return next((s for s in self.sources if resource in s.covers), None)

    def _source_of_tool(self, tool: str) -> Source | None:
        return next((s for s in self.sources if tool in s.covers_tools), None)

    def apply(self, agent: Agent, operation: dict[str, Any], key: str) -> ApplyOutcome:
        kind = operation.get("op")
        if kind in (OperationKind.REMOVE_TOOL, OperationKind.ADD_TOOL):
            source = self._source_of_tool(str(operation.get("target")))
            if source is None:
                return self.inner.apply(agent, operation, key)
            outcome = correct_tool_at_source(source, agent, operation["target"],
                                             kind == OperationKind.ADD_TOOL, key=key)
            return ApplyOutcome.APPLIED if outcome["statements"] else ApplyOutcome.DUPLICATE
        source = self._source_of(str(operation.get("target")))
        if source is None or kind not in (OperationKind.SET_DATA_ACCESS,
                                          OperationKind.REMOVE_DATA):
            return self.inner.apply(agent, operation, key)
        wanted = operation.get("value") if kind == OperationKind.SET_DATA_ACCESS else None
        if wanted is not None and not isinstance(wanted, str):
            raise ConnectorError(f"{source.name}: cannot grant {wanted!r}")
        outcome = correct_at_source(source, agent, operation["target"], wanted, key=key)
        return ApplyOutcome.APPLIED if outcome["statements"] else ApplyOutcome.DUPLICATE


def sources_for(agent: Agent) -> list[Source]:
    """The declared permission sources an agent is bound to."""
    return [s for s in settings.PERMISSION_SOURCES.values() if s.role_of(agent.name)]
