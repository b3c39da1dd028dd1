"""Toxic combinations judged on the fleet: what a proposal would join (registry/toxic.py is
the pure graph; this loads the approved specs and turns paths into guardrail-style verdicts)."""

from dataclasses import dataclass, field
from typing import Any

from registry.choices import GuardrailOutcome, Lifecycle, ToxicEffect
from registry.models import Agent, ToxicCombination
from registry.toxic import ToxicPath, new_paths

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


def approved_specs() -> dict[str, dict[str, Any]]:
    """Every agent's approved spec, by name (retired agents reach nobody)."""
    return dict(Agent.objects.exclude(lifecycle=Lifecycle.RETIRED)
                .filter(active_version__isnull=False)
                .values_list("name", "active_version__spec"))


def _verdict(rule: ToxicCombination, path: ToxicPath) -> ToxicResult:
    deny = rule.effect == ToxicEffect.DENY
    return ToxicResult(
        f"{RESULT_PREFIX}{rule.name}", rule.effect,
        GuardrailOutcome.DENIED if deny else GuardrailOutcome.REQUIRES_APPROVALS,
        f"would join {rule.left} and {rule.right}: {path.describe()}",
        0 if deny else rule.required_approvals, path.to_dict())


def judge_proposal(agent_name: str, spec: dict[str, Any]) -> list[ToxicResult]:
    """The paths through this agent that approving `spec` would create, each judged by its
    rule. Paths that exist already are not this proposal's doing (the observed-path findings
    report them)."""
    rules = enabled_rules()
    if not rules:
        return []
    before = approved_specs()
    after = {**before, agent_name: spec}
    created, _ = new_paths(before, after, agent_name, rules)
    by_name = {rule.name: rule for rule in rules}
    return [_verdict(by_name[path.rule], path) for path in created]
