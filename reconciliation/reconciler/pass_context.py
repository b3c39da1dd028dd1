"""What one pass carries from observing to verifying: the agent, the trigger, the time, what was
observed and what caused it."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciliation.attribution import Rollout, cause_of, pending_proposals
from reconciliation.reconciler.diff import Drift
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
    converged_generation: int | None = None  # the generation it last converged at
    rollout: Rollout | None | bool = False  # loaded on the first new drift (False: not yet)
    # by pointer: what the agent reported and what the source of record saw (witnesses.py)
    witnesses: dict[str, dict[str, Any]] | None = None

    def cause(self, drift: Drift) -> dict[str, Any]:
        """What caused a drift found now (reconciliation/attribution.py)."""
        if self.proposals is None and not self.change:
            self.proposals = pending_proposals(self.agent)
        if self.rollout is False:
            self.rollout = self._rollout()
        cause = cause_of(drift, change=self.change, observed=self.actual or {},
                         proposals=self.proposals or [], now=self.now, rollout=self.rollout)
        seen = (self.witnesses or {}).get(drift.pointer)
        if seen is not None:
            cause["witnesses"] = {**seen, "said": said(seen)}
        return cause

    def _rollout(self) -> Rollout | None:
        """The move from the generation it last converged at, when a newer one is approved."""
        was = self.converged_generation
        if not was or was >= self.generation:
            return None
        spec = (self.agent.versions.filter(generation=was).values_list("spec", flat=True)
                .first())
        return None if spec is None else Rollout(self.agent.name, was, self.generation, spec)
