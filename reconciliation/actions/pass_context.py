"""What one pass carries from observing to verifying: the agent, the trigger, the time, what was
observed and what caused it."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciliation.attribution import cause_of, pending_proposals
from reconciliation.diff import Drift
from reconciliation.witnesses import said
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
    # by pointer: what the agent reported and what the source of record saw (witnesses.py)
    witnesses: dict[str, dict[str, Any]] | None = None

    def cause(self, drift: Drift) -> dict[str, Any]:
        """What caused a drift found now (reconciliation/attribution.py)."""
        if self.proposals is None and not self.change:
            self.proposals = pending_proposals(self.agent)
        cause = cause_of(drift, change=self.change, observed=self.actual or {},
                         proposals=self.proposals or [], now=self.now)
        seen = (self.witnesses or {}).get(drift.pointer)
        if seen is not None:
            cause["witnesses"] = {**seen, "said": said(seen)}
        return cause
