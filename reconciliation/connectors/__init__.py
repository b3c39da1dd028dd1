"""Connectors reach an agent's platform: read its actual state and apply keyed changes."""

from reconciliation.connectors.base import ApplyOutcome, Connector, ConnectorError, SimulatedCrash
from registry.models import Agent


def connector_for(agent: Agent) -> Connector:
    """The connector the agent's approved spec names."""
    from reconciliation.connectors.http import HttpConnector
    from reconciliation.connectors.push import PushConnector
    from reconciliation.connectors.sandbox import SandboxConnector

    kind = (agent.connector or {}).get("type", "push")
    if kind == "sandbox":
        return SandboxConnector()
    if kind == "http":
        return HttpConnector(agent.connector["url"], agent.connector.get("secret_env", ""))
    return PushConnector()


__all__ = ["ApplyOutcome", "Connector", "ConnectorError", "SimulatedCrash", "connector_for"]
