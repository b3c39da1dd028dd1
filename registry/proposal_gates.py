"""Checks other apps add to every proposal before it is judged: a Git source, for one, refuses
an edit that would make the database disagree with its branch. Registry cannot import the apps
built on it, so they register here (in their AppConfig.ready) and `propose` asks them all."""

from collections.abc import Callable
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
