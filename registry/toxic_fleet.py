"""Toxic combinations judged on the fleet: what a proposal would join (registry/toxic.py is
the pure graph; this reads the approved specs near a proposal and turns paths into
guardrail-style verdicts).

Like Gatekeeper's synced referential data: each approval records where its agent meets others
(MeetingPoint), and a proposal's judge follows those rows from the proposal's own points in one
recursive query, so it decodes the specs of the agents it could join, not the fleet's. Judging
every pending proposal (a rule or guardrail changed) reads once around all of them.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models.expressions import RawSQL

from registry.choices import GuardrailOutcome, Lifecycle, ToxicEffect
from registry.models import Agent, MeetingPoint, ToxicCombination
from registry.toxic import Neighbourhoods, ToxicPath, meeting_points, new_paths

RESULT_PREFIX = "toxic:"


@dataclass(frozen=True)
class ToxicResult:
    """A toxic combination's verdict on one proposal, in the shape of a guardrail result (so
    denial, extra approvals and the proposal page work as they do for guardrails), with the
    path it would create."""

    guardrail: str
    effect: str
    outcome: str
    message: str
    required_approvals: int = 0
    path: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"guardrail": self.guardrail, "effect": self.effect, "outcome": self.outcome,
                "message": self.message, "required_approvals": self.required_approvals,
                "path": self.path}


def enabled_rules() -> list[ToxicCombination]:
    return list(ToxicCombination.objects.filter(enabled=True).order_by("name"))


def record_meeting_points(agent: Agent, spec: dict[str, Any]) -> None:
    """Rewrite where `agent` meets others for its newly approved spec (in the approval's
    transaction, so the rows always follow the active version)."""
    MeetingPoint.objects.filter(agent=agent).delete()
    MeetingPoint.objects.bulk_create([MeetingPoint(agent=agent, point=point)
                                      for point in sorted(meeting_points(agent.name, spec))])


def _reached_agents(points: set[str]) -> RawSQL:
    """The ids of the agents joined to `points` by any chain of shared meeting points."""
    table = MeetingPoint._meta.db_table
    seeds = ", ".join(["(CAST(%s AS TEXT))"] * len(points))
    return RawSQL(
        f"WITH RECURSIVE reached(point) AS (VALUES {seeds}"
        f" UNION SELECT CAST(mine.point AS TEXT) FROM reached"
        f" JOIN {table} theirs ON theirs.point = reached.point"
        f" JOIN {table} mine ON mine.agent_id = theirs.agent_id)"
        f" SELECT theirs.agent_id FROM {table} theirs"
        f" JOIN reached ON theirs.point = reached.point", sorted(points))


def approved_specs_near(points: set[str]) -> dict[str, dict[str, Any]]:
    """The approved specs, by name, of every agent joined to `points` by any chain of shared
    meeting points (retired agents reach nobody): one query, whose cost is the
    neighbourhood's."""
    if not points:
        return {}
    return dict(Agent.objects.exclude(lifecycle=Lifecycle.RETIRED)
                .filter(active_version__isnull=False, pk__in=_reached_agents(points))
                .values_list("name", "active_version__spec"))


def _verdict(rule: ToxicCombination, path: ToxicPath) -> ToxicResult:
    deny = rule.effect == ToxicEffect.DENY
    return ToxicResult(
        f"{RESULT_PREFIX}{rule.name}", rule.effect,
        GuardrailOutcome.DENIED if deny else GuardrailOutcome.REQUIRES_APPROVALS,
        f"would join {rule.left} and {rule.right}: {path.describe()}",
        0 if deny else rule.required_approvals, path.to_dict())


class ToxicJudge:
    """The enabled rules and the approved specs around some proposals, read once (two queries
    however many proposals), then each proposal judged in memory on its own neighbourhood."""

    def __init__(self, proposals: Iterable[tuple[str, dict[str, Any]]]) -> None:
        self.rules = enabled_rules()
        self._by_name = {rule.name: rule for rule in self.rules}
        self._specs: dict[str, dict[str, Any]] = {}
        self._read: set[str] = set()  # every point the specs read are closed around
        self._near = Neighbourhoods({})
        if self.rules:
            self._read_around(set().union(*(meeting_points(name, spec)
                                            for name, spec in proposals)))

    def _read_around(self, points: set[str]) -> None:
        self._specs |= approved_specs_near(points)
        self._near = Neighbourhoods(self._specs)
        self._read |= points | self._near.points

    def judge(self, agent_name: str, spec: dict[str, Any]) -> list[ToxicResult]:
        """The paths through this agent that approving `spec` would create, each judged by
        its rule. Paths that exist already are not this proposal's doing (the observed-path
        findings report them)."""
        if not self.rules:
            return []
        if missing := meeting_points(agent_name, spec) - self._read:
            self._read_around(missing)  # a spec this judge was not made for
        before = self._near.around(agent_name, spec)
        created, _ = new_paths(before, {**before, agent_name: spec}, agent_name, self.rules)
        return [_verdict(self._by_name[path.rule], path) for path in created]


def judge_proposal(agent_name: str, spec: dict[str, Any]) -> list[ToxicResult]:
    """One proposal judged (ToxicJudge.judge), reading only its neighbourhood."""
    return ToxicJudge([(agent_name, spec)]).judge(agent_name, spec)
