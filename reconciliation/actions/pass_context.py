"""What one pass carries from observing to verifying: the agent, the trigger, the time, what was
observed and what caused it."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciliation.attribution import cause_of, pending_proposals
from reconciliation.diff import Drift
from registry.models import Agent


@dataclass(frozen=True)
class InSync:
    """A pass found no diff between the desired state (suspended or not) and `observed`."""

    observed: dict[str, Any]
    suspended: bool


@dataclass
class PassContext:
    agent: Agent
    trigger: str
    now: datetime
    started: float
    generation: int
    shadow: bool
    observed_at: datetime | None = None  # when the state this pass judges was first seen
    actual: dict[str, Any] | None = None  # the state this pass judges
    change: dict[str, Any] | None = None  # the change that made it, when the reporter says
    proposals: list[tuple[int, dict[str, Any]]] | None = None  # loaded on the first new drift

    def cause(self, drift: Drift) -> dict[str, Any]:
        """What caused a drift found now (reconciliation/attribution.py)."""
        if self.proposals is None and not self.change:
            self.proposals = pending_proposals(self.agent)
        return cause_of(drift, change=self.change, observed=self.actual or {},
                        proposals=self.proposals or [], now=self.now)
