"""Connectors reach an agent's platform: read its actual state and apply keyed changes."""

from reconciliation.connectors.base import (
    ApplyOutcome,
    Connector,
    ConnectorError,
    CorrectionRefused,
    SimulatedCrash,
)
from registry.models import Agent


def connector_for(agent: Agent) -> Connector:
    """The connector the agent's approved spec names, with the permission sources the admin
    bound the agent to beside it (reconciliation/connectors/witnessed.py)."""
    # cycle: reconciliation.connectors.witnessed imports this module
    from reconciliation.connectors.witnessed import WitnessedConnector, sources_for

    own = _own_connector(agent)
    sources = sources_for(agent)
    return WitnessedConnector(own, sources) if sources else own


def _own_connector(agent: Agent) -> Connector:
    """The connector the agent's approved spec names."""
    # cycle: reconciliation.connectors.http imports this module
    from reconciliation.connectors.http import HttpConnector

    # cycle: reconciliation.connectors.push imports this module
    from reconciliation.connectors.push import PushConnector

    # sandbox is above reconciliation (a listed back-edge)
    from sandbox.connector import SandboxConnector

    kind = (agent.connector or {}).get("type", "push")
    if kind == "sandbox":
        return SandboxConnector()
    if kind == "http":
        return HttpConnector(agent.connector["url"], agent.connector.get("secret_env", ""))
    return PushConnector()


__all__ = ["ApplyOutcome", "Connector", "ConnectorError", "CorrectionRefused", "SimulatedCrash",
           "connector_for"]
