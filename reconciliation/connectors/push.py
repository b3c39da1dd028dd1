"""push: the agent reports its state and pulls its desired state; a correction is published as
the desired state it pulls, and verification waits for its next report."""

from datetime import datetime
from typing import Any

from reconciliation.connectors.base import ApplyOutcome
from registry.models import Agent


class PushConnector:
    """The agent (or its sidecar) is the one that changes itself."""

    name = "push"

    def __init__(self) -> None:
        # when the state `observe` returned was reported, and what the agent said changed it
        self.observed_at: datetime | None = None
        self.last_change: dict[str, Any] | None = None

    def observe(self, agent: Agent) -> dict[str, Any] | None:
        """The agent's latest report, with its time and change, in one read."""
        latest = (agent.observations.order_by("-observed_at")
                  .values_list("state", "observed_at", "change").first())
        if latest is None:
            return None
        state, self.observed_at, self.last_change = latest
        return state

    def apply(self, agent: Agent, operation: dict[str, Any], key: str) -> ApplyOutcome:
        # GET /desired-state already serves the effective desired spec: nothing to send.
        return ApplyOutcome.PUBLISHED
