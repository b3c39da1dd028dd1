"""Desired versus actual side by side (the Argo CD diff view), and an agent's compliance
timeline (in or out of policy over time, as AWS Config shows per resource)."""

import difflib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import yaml

from audit.choices import AuditAction
from reconciliation.choices import OPEN_STATUSES

MAX_LINE = 1_000_000


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
    # one line per value however long, so a changed text (an MCP tool's description) is one
    # row with the approved text on the left and the new one on the right
    return yaml.safe_dump(state, sort_keys=True, default_flow_style=False,
                          width=MAX_LINE).splitlines()


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
    """A stretch of time the agent was in (or out of) policy, or not yet judged."""

    start: datetime
    end: datetime
    in_policy: bool | None  # None: not reconciled yet, nothing known
    label: str
    share: float  # of the whole timeline, for drawing


@dataclass(frozen=True)
class Transition:
    """An audited moment that may change whether an agent is in policy: a finding opened,
    came back, was reopened, corrected, resolved or allowed (logged), or the agent was
    suspended or resumed."""

    at: datetime
    action: str  # an AuditAction value
    target: str  # "finding:<pk>" or "agent:<name>"
    before: str | None = None  # the finding's status before, when the entry records it


# Statuses of a finding that still counts against the agent.
OUT_OF_POLICY = frozenset(str(status) for status in OPEN_STATUSES)
# When an entry does not record the status before it, whether the finding counted before.
_COUNTED_BEFORE = {AuditAction.FINDING_OPENED: False, AuditAction.FINDING_REGRESSED: False,
                   AuditAction.FINDING_REOPENED: True, AuditAction.FINDING_CORRECTED: True,
                   AuditAction.FINDING_RESOLVED: True, AuditAction.FINDING_LOGGED: True}
TRANSITIONS = (*_COUNTED_BEFORE, AuditAction.AGENT_SUSPENDED, AuditAction.AGENT_RESUMED,
               AuditAction.AGENT_RETIRED)


def timeline(*, now: datetime, span: timedelta, judged_since: datetime | None,
             open_findings: set[int], suspended: bool,
             transitions: list[Transition], retired: bool = False) -> list[Segment]:
    """Segments over (now - span, now], oldest first, worked backwards from the state now
    (the findings that count and whether the agent is suspended) through the transitions in
    the window: nothing changed means one solid span. Before `judged_since` (the first pass
    or transition) nothing is known; after its retirement an agent is no longer judged (never
    "in policy")."""
    start = now - span
    if judged_since is None:
        return [Segment(start, now, None, "not reconciled yet", 1.0)]
    counting, held, gone = set(open_findings), suspended, retired
    stretches: list[tuple[datetime, datetime, bool | None, str]] = []
    end = now
    for step in sorted(transitions, key=lambda t: t.at, reverse=True):
        if step.at <= start:
            break
        stretches.append((step.at, end, *_verdict(counting, held, gone)))
        end = step.at
        kind, _, key = step.target.partition(":")
        if step.action == AuditAction.AGENT_RETIRED:
            gone = False
        elif step.action == AuditAction.AGENT_SUSPENDED:
            held = False
        elif step.action == AuditAction.AGENT_RESUMED:
            held = True
        elif kind == "finding" and key.isdigit():
            before = (step.before in OUT_OF_POLICY if step.before is not None
                      else _COUNTED_BEFORE.get(step.action, False))
            (counting.add if before else counting.discard)(int(key))
    known_from = max(start, min(judged_since, end))
    stretches.append((known_from, end, *_verdict(counting, held, gone)))
    if known_from > start:
        stretches.append((start, known_from, None, "not reconciled yet"))
    segments: list[Segment] = []
    for begin, finish, ok, label in reversed(stretches):
        if finish <= begin:
            continue
        if segments and (segments[-1].in_policy, segments[-1].label) == (ok, label):
            begin = segments.pop().start
        segments.append(Segment(begin, finish, ok, label, (finish - begin) / span))
    return segments


def _verdict(counting: set[int], suspended: bool, retired: bool = False
             ) -> tuple[bool | None, str]:
    if retired:
        return None, "retired"
    if suspended:
        return False, "suspended"
    if counting:
        return False, "drifted"
    return True, "in policy"
