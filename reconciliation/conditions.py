"""Kubernetes-style status conditions, computed as a pure function."""

from datetime import datetime
from typing import Any

from reconciliation.choices import ConditionType

SILENT_REASON = "Silent"


def condition(kind: str, status: bool, reason: str, message: str, generation: int,
              previous: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
    """One condition; lastTransitionTime moves only when the status flips."""
    value = "True" if status else "False"
    since = previous["lastTransitionTime"] if previous and previous["status"] == value else (
        now.isoformat().replace("+00:00", "Z"))
    return {"type": kind, "status": value, "reason": reason, "message": message,
            "lastTransitionTime": since, "observedGeneration": generation}


def compute_conditions(previous: list[dict[str, Any]], *, generation: int, now: datetime,
                       drifted: int, correcting: int, escalated: int, suspended: bool,
                       failed: str = "") -> list[dict[str, Any]]:
    """Ready, Drifted, Reconciling, Escalated and Suspended from the counts of one pass."""
    before = {c["type"]: c for c in previous}
    ready = not (drifted or correcting or escalated or failed)
    if failed:
        ready_reason, ready_message = "ReconcileFailed", failed
    elif ready:
        ready_reason, ready_message = "Converged", f"matches generation {generation}"
    else:
        ready_reason, ready_message = "Drifted", "actual state differs from the approved state"
    rows = [
        (ConditionType.READY, ready, ready_reason, ready_message),
        (ConditionType.DRIFTED, drifted > 0, "DriftFound" if drifted else "NoDrift",
         f"{drifted} open finding(s)" if drifted else "no drift"),
        (ConditionType.RECONCILING, correcting > 0,
         "Verifying" if correcting else "Idle",
         f"{correcting} correction(s) awaiting verification" if correcting else ""),
        (ConditionType.ESCALATED, escalated > 0, "AwaitingHuman" if escalated else "NoEscalation",
         f"{escalated} open escalation(s)" if escalated else ""),
        (ConditionType.SUSPENDED, suspended, "Suspended" if suspended else "Active",
         "suspended until a human clears it" if suspended else ""),
    ]
    return [condition(kind, status, reason, message, generation, before.get(kind), now)
            for kind, status, reason, message in rows]


def with_silence(conditions: list[dict[str, Any]], silence: Any) -> list[dict[str, Any]]:
    """Ready=Unknown, reason Silent, while a silence is open: what the agent does now is not
    known, whatever the last pass concluded. `silence`: the agent's open Silence
    (reconciliation/silence.py), or None."""
    if silence is None:
        return conditions
    message = (f"nothing heard (no report, event or decision) since "
               f"{silence.to_dict()['last_heard_at']}" if silence.last_heard_at
               else "seen in traffic, never reported its state")
    message += f" (expected every {silence.expected_seconds} s)"
    since = silence.started_at.isoformat().replace("+00:00", "Z")
    return [{**c, "status": "Unknown", "reason": SILENT_REASON, "message": message,
             "lastTransitionTime": since} if c["type"] == ConditionType.READY else c
            for c in conditions]
