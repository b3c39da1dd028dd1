"""Checks other apps add to every proposal: a gate before it is judged (a Git source, for one,
refuses an edit that would make the database disagree with its branch), and a judge that adds
its results to the proposal's assessment beside the guardrails' (runtime: the group rules a
relabel takes the agent into or out of). Registry cannot import the apps built on it, so they
register here (in their AppConfig.ready) and `propose` asks them all."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# gate(agent, spec, metadata, source) raises a DomainError to refuse the proposal
Gate = Callable[[Any, dict, dict, str], None]
_gates: list[Gate] = []


def register_gate(gate: Gate) -> None:
    """Add a gate every proposal passes through (once, however often the app starts)."""
    if gate not in _gates:
        _gates.append(gate)


def check_gates(agent: Any, spec: dict, metadata: dict, *, source: str) -> None:
    """Ask every registered gate; the first refusal stands and nothing is proposed."""
    for gate in _gates:
        gate(agent, spec, metadata, source)


@dataclass(frozen=True)
class Judge:
    """`judge(agent_name, active_spec, spec, current, metadata, loaded)` returns guardrail
    results (registry.guardrails.GuardrailResult) for a proposal that changes an approved
    agent's metadata (`current`, as it is; `metadata`, as it would be); `loaded` is what
    `load()` read, once for a caller judging many proposals."""

    load: Callable[[], Any]
    judge: Callable[[str, dict | None, dict, dict, dict, Any], list[Any]]


_judges: list[Judge] = []


def register_judge(judge: Judge) -> None:
    """Add a judge every assessment asks (once, however often the app starts)."""
    if judge not in _judges:
        _judges.append(judge)


def loaded_judges() -> list[tuple[Judge, Any]]:
    """Every registered judge with what it reads, read now."""
    return [(judge, judge.load()) for judge in _judges]
