"""The reconcile decision as a pure function: desired + actual + what is already under way
-> what to apply, block, escalate or log, and which findings are now verified.

No ORM here: the observe stage loads rows, the pass calls `decide`, and the correct stage
carries out the decision through a connector. Level-triggered: a converged agent yields an
empty decision, and a pass after a crash re-derives exactly the changes that are still
missing.
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from reconciliation.reconciler.diff import Drift, Operation, OperationKind, Severity, diff
from registry.waivers import is_waived

MODES = ("correct", "block", "escalate", "log")
_SEVERITY_PHASE = {Severity.HIGH: 1, Severity.MEDIUM: 2, Severity.LOW: 3}


@dataclass(frozen=True)
class FindingView:
    """What the reconciler needs to know about an existing finding."""

    fingerprint: str
    status: str
    occurrence: int = 1
    attempts: int = 0
    applied_at: datetime | None = None  # when its latest correction was applied
    hold_until: datetime | None = None
    revert_ordered: bool = False  # a human ordered this drift reverted


@dataclass(frozen=True)
class Step:
    """One corrective change to apply, with its idempotency key."""

    drift: Drift
    operation: Operation
    key: str
    occurrence: int
    attempt: int


@dataclass
class Decision:
    """Everything one pass should do."""

    drifts: list[Drift] = field(default_factory=list)
    apply: list[Step] = field(default_factory=list)
    shadow: list[Step] = field(default_factory=list)  # would apply, but shadow/breaker holds
    waiting: list[Drift] = field(default_factory=list)  # applied; waiting for the agent/platform
    block: list[Drift] = field(default_factory=list)
    escalate: list[tuple[Drift, str]] = field(default_factory=list)  # with the reason
    log: list[Drift] = field(default_factory=list)
    waived: list[Drift] = field(default_factory=list)  # allowed by a waiver in force
    gone: list[str] = field(default_factory=list)  # fingerprints of findings no longer seen
    regressed: list[Drift] = field(default_factory=list)

    @property
    def converged(self) -> bool:
        return not self.drifts

    def without(self, fingerprints: set[str]) -> "Decision":
        """The same decision taking no step on the drifts with these fingerprints (what was
        found stays found)."""
        def kept(drifts: list[Drift]) -> list[Drift]:
            return [d for d in drifts if d.fingerprint not in fingerprints]

        return replace(
            self, apply=[s for s in self.apply if s.drift.fingerprint not in fingerprints],
            shadow=[s for s in self.shadow if s.drift.fingerprint not in fingerprints],
            escalate=[(d, why) for d, why in self.escalate if d.fingerprint not in fingerprints],
            block=kept(self.block), log=kept(self.log), waived=kept(self.waived))


def idempotency_key(agent: str, generation: int, operation: Operation, occurrence: int) -> str:
    """Derived from (agent, generation, operation, target) and the drift's occurrence, so a
    retry of the same change reuses it and a drift that returns later gets a new one."""
    material = f"{agent}|{generation}|{operation.key}|{occurrence}"
    return hashlib.sha256(material.encode()).hexdigest()[:40]


def mode_for(spec: dict[str, Any], drift: Drift) -> str:
    """The enforcement mode of the drift's area (falling back to the default)."""
    enforcement = spec.get("enforcement") or {}
    mode = enforcement.get(str(drift.area)) or enforcement.get("default") or "correct"
    return mode if mode in MODES else "correct"


def in_order(drifts: list[Drift]) -> list[Operation]:
    """Deduplicated corrective operations. Suspend comes first (stop the agent before touching
    it), then high, medium and low severity fixes in drift order, and resume comes last."""
    phased: dict[str, tuple[int, int, Operation]] = {}
    for index, drift in enumerate(drifts):
        operation = drift.operation
        if operation.op is OperationKind.SUSPEND:
            phase = 0
        elif operation.op is OperationKind.RESUME:
            phase = 4
        else:
            phase = _SEVERITY_PHASE[drift.severity]
        phased.setdefault(operation.key, (phase, index, operation))
    return [operation for _, _, operation in sorted(phased.values(), key=lambda p: p[:2])]


def plan(desired: Mapping[str, Any], actual: Mapping[str, Any] | None, now: datetime, *,
         suspended: bool = False) -> list[Operation]:
    """Deduplicated corrective operations between desired and actual, in the order they are
    applied (`in_order`)."""
    return in_order(diff(desired, actual, now, suspended=suspended))


def decide(
    desired: dict[str, Any],
    actual: dict[str, Any],
    now: datetime,
    *,
    agent: str,
    generation: int,
    suspended: bool = False,
    findings: dict[str, FindingView] | None = None,
    hold_applied: bool = False,
    verify_timeout: timedelta = timedelta(seconds=60),
    max_attempts: int = 3,
    waived: tuple[str, ...] = (),
    drifts: list[Drift] | None = None,
) -> Decision:
    """Decide one pass. `hold_applied` (shadow mode or a tripped breaker) records the changes
    that would be made as `shadow` and applies none; drift under a `waived` pointer is
    recorded and allowed. `drifts` is the diff of `desired` and `actual` when the caller has
    it already (the pass does: the diff stage ran before the plan)."""
    findings = findings or {}
    if drifts is None:
        drifts = diff(desired, actual, now, suspended=suspended)
    decision = Decision(drifts=drifts)
    seen = {d.fingerprint for d in drifts}
    decision.gone = sorted(fp for fp, f in findings.items() if fp not in seen and f.status in (
        "open", "correcting", "regressed", "blocked", "escalated", "accepted", "logged"))
    by_key = {}
    for drift in drifts:
        by_key.setdefault(drift.operation.key, drift)
    for operation in in_order(drifts):
        drift = by_key[operation.key]
        finding = findings.get(drift.fingerprint)
        if finding and finding.status in ("escalated", "blocked", "accepted"):
            continue  # a human holds it (accepted: until the proposal is decided)
        if is_waived(waived, drift.pointer):
            decision.waived.append(drift)
            continue
        occurrence = finding.occurrence if finding else 1
        attempt = (finding.attempts if finding else 0) + 1
        if finding and finding.status in ("open", "regressed") and (
                finding.attempts >= max_attempts):
            # every attempt failed at the platform (it refused or kept failing): a human decides
            decision.escalate.append(
                (drift, f"correction failed at the platform {finding.attempts} times"))
            continue
        if finding and finding.status == "corrected":
            if finding.hold_until and now <= finding.hold_until:
                decision.regressed.append(drift)
                if finding.attempts >= max_attempts:
                    decision.escalate.append(
                        (drift, f"drift came back after {finding.attempts} corrections"))
                    continue
            else:
                attempt = 1  # back after the hold window: a fresh start
            occurrence += 1  # either way a new occurrence, so a new idempotency key
        elif finding and finding.status == "resolved":
            occurrence, attempt = occurrence + 1, 1
        mode = mode_for(desired, drift)
        if finding and finding.revert_ordered:
            mode = "correct"
        if operation.op is OperationKind.SUSPEND and suspended:
            mode = "correct"  # enforcing a suspension is itself the correction
        if mode == "log":
            decision.log.append(drift)
            continue
        if mode == "escalate":
            decision.escalate.append((drift, f"enforcement mode escalate for {drift.area}"))
            continue
        if mode == "block":
            if hold_applied:  # shadow mode or a tripped breaker: record the suspension only
                suspend = Operation(OperationKind.SUSPEND, "agent")
                if not any(step.operation == suspend for step in decision.shadow):
                    decision.shadow.append(Step(
                        drift, suspend, idempotency_key(agent, generation, suspend, occurrence),
                        occurrence, attempt))
            else:
                decision.block.append(drift)
            continue
        if finding and finding.status == "correcting" and finding.applied_at:
            if now - finding.applied_at < verify_timeout:
                decision.waiting.append(drift)  # lagging reads or a push agent: wait, re-verify
                continue
            if finding.attempts >= max_attempts:
                decision.escalate.append(
                    (drift, f"correction did not hold after {finding.attempts} attempts"))
                continue
            occurrence += 1  # it did not hold: try again under a new key
        step = Step(drift, operation, idempotency_key(agent, generation, operation, occurrence),
                    occurrence, attempt)
        (decision.shadow if hold_applied else decision.apply).append(step)
    return decision
