"""Desired versus actual side by side (the Argo CD diff view), and an agent's compliance
timeline (in or out of policy over time, as AWS Config shows per resource)."""

import difflib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import yaml


@dataclass(frozen=True)
class Row:
    """One row of the side-by-side view."""

    tag: str  # equal | changed | only_desired | only_actual
    left_number: int | None
    left: str
    right_number: int | None
    right: str


def _lines(state: dict[str, Any] | None) -> list[str]:
    if state is None:
        return []
    return yaml.safe_dump(state, sort_keys=True, default_flow_style=False).splitlines()


def side_by_side(desired: dict[str, Any], actual: dict[str, Any] | None) -> list[Row]:
    """Aligned YAML lines of the two states with the differing ones marked."""
    left, right = _lines(desired), _lines(actual)
    rows: list[Row] = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            rows += [Row("equal", a0 + i + 1, left[a0 + i], b0 + i + 1, right[b0 + i])
                     for i in range(a1 - a0)]
            continue
        for i in range(max(a1 - a0, b1 - b0)):
            has_left, has_right = a0 + i < a1, b0 + i < b1
            kind = "changed" if has_left and has_right else (
                "only_desired" if has_left else "only_actual")
            rows.append(Row(kind, a0 + i + 1 if has_left else None,
                            left[a0 + i] if has_left else "",
                            b0 + i + 1 if has_right else None,
                            right[b0 + i] if has_right else ""))
    return rows


@dataclass(frozen=True)
class Segment:
    """A stretch of time the agent was in (or out of) policy."""

    start: datetime
    end: datetime
    in_policy: bool
    label: str
    share: float  # of the whole timeline, for drawing


def timeline(runs: list[tuple[datetime, str]], now: datetime,
             span: timedelta = timedelta(hours=24)) -> list[Segment]:
    """Segments from reconcile runs (time, result), oldest first: each run's verdict holds
    until the next run changes it."""
    start = now - span
    points: list[tuple[datetime, bool, str]] = []
    for at, result in sorted(runs):
        ok = result in ("converged", "corrected")
        label = "in policy" if ok else result
        if points and points[-1][1] == ok:
            continue
        points.append((max(at, start), ok, label))
    segments = []
    for index, (begin, ok, label) in enumerate(points):
        end = points[index + 1][0] if index + 1 < len(points) else now
        if end <= begin:
            continue
        segments.append(Segment(begin, end, ok, label, (end - begin) / span))
    return segments
