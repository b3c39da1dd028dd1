"""A finding's life: opened, and moved from status to status, each by one function that writes
its audit row and announces its alert itself (Zulip's do_* actions), so no caller writes a
finding's audit row by hand and no move goes unrecorded. The moves allowed are
FINDING_TRANSITIONS; what each writes, FINDING_MOVE_AUDIT and FINDING_MOVE_ALERT beside it."""

from datetime import datetime
from typing import Any

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from reconciliation.actions.common import alert
from reconciliation.choices import (
    FINDING_MOVE_ALERT,
    FINDING_MOVE_AUDIT,
    OPEN_STATUSES,
    FindingStatus,
)
from reconciliation.models import Finding
from registry.models import Agent

# "The alert this move announces by default" (None names no alert).
DEFAULT: Any = object()


def open_finding(agent: Agent, *, actor: Any = SYSTEM, why: str, after: dict | None = None,
                 alert_fields: dict | None = None, **fields: Any) -> Finding:
    """A new finding on `agent` (its fields as the model's): `finding.opened` with `why`
    and the `after` extras, and `drift.detected` with `alert_fields`."""
    finding = Finding.objects.create(agent=agent, **fields)
    audit.record(actor=actor, action=AuditAction.FINDING_OPENED, target=f"finding:{finding.pk}",
                 agent=agent.name, after={**finding.to_dict(), **(after or {})}, reason=why)
    alert(AlertKind.DRIFT_DETECTED, agent, finding, **(alert_fields or {}))
    return finding


def move_action(was: str, to: str) -> str | None:
    """The audit action of a move (None: the move's cause records it; see choices)."""
    if to == FindingStatus.OPEN and was in OPEN_STATUSES:
        return AuditAction.FINDING_REOPENED
    if to == FindingStatus.ESCALATED and was == FindingStatus.ACCEPTED:
        return AuditAction.FINDING_REOPENED  # its proposal was refused: a human decides again
    return FINDING_MOVE_AUDIT[to]


def move_alert(was: str, to: str) -> AlertKind | None:
    """The alert a move announces unless its caller names another: drift seen again only
    when it comes back from closed (a held finding reopened is no news to the feed)."""
    if to == FindingStatus.OPEN and was in OPEN_STATUSES:
        return None
    return FINDING_MOVE_ALERT.get(to)


def move_finding(finding: Finding, to: str, *, actor: Any = SYSTEM, reason: str | None = None,
                 why: str | None = None, at: datetime | None = None,
                 agent: Agent | None = None, after: dict | None = None,
                 announce: AlertKind | None = DEFAULT, alert_fields: dict | None = None,
                 **fields: Any) -> Finding:
    """Move `finding` to status `to` (Finding.transition: refused unless allowed; `reason`
    and `fields` set on it) and record it: the move's audit row by `actor`, its reason `why`
    (the finding's new `reason` unless given), before and after, and its alert (`announce`
    names another, or None for none) with `alert_fields`. `agent` saves a query when the
    caller holds it."""
    agent = agent or finding.agent
    was = finding.status
    finding.transition(to, reason=reason, at=at, **fields)
    action = move_action(was, to)
    if action is not None:
        audit.record(actor=actor, action=action, target=f"finding:{finding.pk}",
                     agent=agent.name, before={"status": was},
                     after={**finding.to_dict(), **(after or {})},
                     reason=why if why is not None else (reason or ""))
    kind = move_alert(was, to) if announce is DEFAULT else announce
    if kind is not None:
        alert(kind, agent, finding, **(alert_fields or {}))
    return finding


def note_acknowledgement(finding: Finding, *, actor: Any, reason: str) -> None:
    """Compliance acknowledged a finding without moving it (it stays in the record)."""
    audit.record(actor=actor, action=AuditAction.FINDING_ACKNOWLEDGED,
                 target=f"finding:{finding.pk}", agent=finding.agent.name, reason=reason)
