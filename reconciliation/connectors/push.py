"""push: the agent reports its state and pulls its desired state; a correction is published as
the desired state it pulls, and verification waits for its next report."""

from typing import Any

from reconciliation.connectors.base import ApplyOutcome
from registry.models import Agent


class PushConnector:
    """The agent (or its sidecar) is the one that changes itself."""

    name = "push"

    def observe(self, agent: Agent) -> dict[str, Any] | None:
        latest = agent.observations.order_by("-observed_at").only("state").first()
        return None if latest is None else latest.state

    def apply(self, agent: Agent, operation: dict[str, Any], key: str) -> ApplyOutcome:
        # GET /desired-state already serves the effective desired spec: nothing to send.
        return ApplyOutcome.PUBLISHED
