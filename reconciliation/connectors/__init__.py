"""Connectors reach an agent's platform: read its actual state and apply keyed changes.

Each kind of connector an agent's spec may name (`connector.type`) is registered here by the
app that owns it, from its AppConfig.ready: push and http by reconciliation, sandbox by
sandbox. A kind nobody registered is refused (deny by default), never taken for another."""

from collections.abc import Callable
from typing import Any

from reconciliation.connectors.base import (
    ApplyOutcome,
    Connector,
    ConnectorError,
    CorrectionRefused,
    SimulatedCrash,
)
from reconciliation.connectors.witnessed import WitnessedConnector, sources_for
from registry.models import Agent

_factories: dict[str, Callable[[Agent], Connector]] = {}


def register(kind: str, factory: Callable[[Agent], Connector]) -> None:
    """`factory(agent)` builds the connector for agents whose spec names `kind`."""
    _factories[kind] = factory


def connector_for(agent: Agent) -> Connector:
    """The connector the agent's approved spec names, with the permission sources the admin
    bound the agent to beside it (reconciliation/connectors/witnessed.py)."""
    own = _own_connector(agent)
    sources = sources_for(agent)
    return WitnessedConnector(own, sources) if sources else own


def _own_connector(agent: Agent) -> Connector:
    """The connector the agent's approved spec names; for a kind nobody registered, one that
    refuses every read and change (the pass is recorded as failed and backs off)."""
    kind = (agent.connector or {}).get("type", "push")
    factory = _factories.get(kind)
    return _Uninstalled(kind, sorted(_factories)) if factory is None else factory(agent)


class _Uninstalled:
    """A connector type this process has no connector for: refused, never guessed at."""

    def __init__(self, kind: str, installed: list[str]) -> None:
        self.name = str(kind)
        self.refusal = (f"no connector of type {kind!r} is installed "
                        f"(installed: {', '.join(installed) or 'none'})")

    def observe(self, agent: Agent) -> dict[str, Any] | None:
        raise ConnectorError(self.refusal)

    def apply(self, agent: Agent, operation: dict[str, Any], key: str) -> ApplyOutcome:
        raise ConnectorError(self.refusal)


__all__ = ["ApplyOutcome", "Connector", "ConnectorError", "CorrectionRefused", "SimulatedCrash",
           "connector_for", "register"]
