"""Maintenance windows: scheduled by compliance (or an admin) for a label selector, they hold
corrections (drift is still found and recorded) until they end, except the operation kinds
they allow; they end on time by themselves. Scheduling, cancelling, each held correction and
the end are audited."""

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from audit.models import AuditEntry
from compliance.actions.stops import MAX_SELECTOR_LABELS, _label_value, _reason, _stopper
from compliance.maintenance import window_for
from compliance.models import MaintenanceWindow
from config import queues
from config.errors import Conflict, Invalid, NotFound
from config.scheduled_time import not_before
from config.times import parse_timestamp
from reconciliation.choices import Trigger
from reconciliation.controller.triggers import request_reconcile
from reconciliation.reconciler.diff import OperationKind
from registry.choices import Lifecycle
from registry.models import Agent

MAX_WINDOW = timedelta(days=7)
SYSTEM = "system:maintenance"


def _when(value: Any, pointer: str) -> Any:
    try:
        return parse_timestamp(value if isinstance(value, str) else None)
    except ValueError:
        raise Invalid("A time is an ISO 8601 date and time with its offset.", details=[
            {"pointer": pointer, "message": "expected e.g. 2026-12-02T22:00:00Z"}]) from None


def _selector(selector: Any) -> dict[str, str]:
    if selector is None:
        return {}
    if not isinstance(selector, dict) or len(selector) > MAX_SELECTOR_LABELS:
        raise Invalid("A selector is an object of up to 16 label values ({} is every agent).",
                      details=[{"pointer": "/selector", "message": "expected an object"}])
    for key in selector:
        if not isinstance(key, str) or not 0 < len(key) <= 63:
            raise Invalid("A label name is a non-empty string of at most 63 characters.",
                          details=[{"pointer": "/selector", "message": "bad label name"}])
    return {k: _label_value(v, f"/selector/{k}") for k, v in selector.items()}


def _allowed(allowed: Any) -> list[str]:
    if allowed is None:
        return []
    kinds = [k.value for k in OperationKind]
    if not isinstance(allowed, list) or any(a not in kinds for a in allowed):
        raise Invalid("`allowed` lists the corrections that still run in the window.",
                      details=[{"pointer": "/allowed",
                                "message": f"each one of {', '.join(kinds)}"}])
    return sorted(set(allowed))


def covered_agents(window: MaintenanceWindow) -> list[Agent]:
    return [a for a in Agent.objects.exclude(lifecycle=Lifecycle.RETIRED).filter(
        active_version__isnull=False).order_by("name") if window.covers(a)]


def _schedule_end(window: MaintenanceWindow) -> None:
    def enqueue() -> None:
        queues.queue("default").enqueue_at(
            not_before(window.ends_at), "compliance.jobs.end_window_job", window.pk)

    transaction.on_commit(enqueue, robust=True)


@transaction.atomic
def schedule_window(*, actor: Any, starts_at: Any, ends_at: Any, reason: Any,
                    selector: Any = None, allowed: Any = None) -> MaintenanceWindow:
    """Schedule a window (compliance or admin); it ends on time by itself."""
    _stopper(actor, "schedule a maintenance window")
    starts, ends = _when(starts_at, "/starts_at"), _when(ends_at, "/ends_at")
    labels, kinds, reason = _selector(selector), _allowed(allowed), _reason(reason)
    now = timezone.now()
    if ends <= starts or ends <= now:
        raise Invalid("A window ends after it starts, and in the future.",
                      details=[{"pointer": "/ends_at", "message": "after starts_at and now"}])
    if ends - starts > MAX_WINDOW:
        raise Invalid("A window lasts at most 7 days.",
                      details=[{"pointer": "/ends_at", "message": "at most 7d after starts_at"}])
    window = MaintenanceWindow.objects.create(
        selector=labels, starts_at=starts, ends_at=ends, allowed=kinds, reason=reason,
        created_by=actor, created_at=now)
    audit.record(actor=actor, action=AuditAction.MAINTENANCE_SCHEDULED,
                 target=f"maintenance:{window.pk}",
                 after={"selector": labels, "starts_at": starts.isoformat(),
                        "ends_at": ends.isoformat(),
                        "allowed": kinds, "agents": [a.name for a in covered_agents(window)]},
                 reason=reason)
    _schedule_end(window)
    return window


@transaction.atomic
def cancel_window(window_id: Any, *, actor: Any, reason: Any) -> MaintenanceWindow:
    """End a window early (its held corrections run at the next pass)."""
    _stopper(actor, "cancel a maintenance window")
    reason = _reason(reason)
    window = (MaintenanceWindow.objects.select_for_update(no_key=True).filter(pk=window_id).first()
              if str(window_id).isdigit() else None)
    if window is None:
        raise NotFound(f"No maintenance window {window_id}.")
    now = timezone.now()
    if window.cancelled_at is not None or window.ends_at <= now:
        raise Conflict(f"Maintenance window {window.pk} is over already.", code="over")
    window.cancelled_by, window.cancelled_at = actor, now
    window.save(update_fields=["cancelled_by", "cancelled_at"])
    audit.record(actor=actor, action=AuditAction.MAINTENANCE_CANCELLED,
                 target=f"maintenance:{window.pk}", before={"ends_at": window.ends_at.isoformat()},
                 after={"cancelled_at": now.isoformat()}, reason=reason)
    _reconcile_covered(window)
    return window


def _reconcile_covered(window: MaintenanceWindow) -> None:

    for agent in covered_agents(window):
        request_reconcile(agent.pk, Trigger.MANUAL)


@transaction.atomic
def end_window(window_id: int) -> bool:
    """At the window's end: record it (once). The held corrections need no pass from here:
    the pass that held them asked to come back at the window's end (its `window_ended`
    requeue), and an agent nothing was held for has nothing to run. False when it is not over
    yet (rescheduled)."""
    window = MaintenanceWindow.objects.select_for_update(no_key=True).filter(pk=window_id).first()
    if window is None or window.ended_at is not None or window.cancelled_at is not None:
        return True
    now = timezone.now()
    if window.ends_at > now:  # moved, or the scheduler ran early: look again at the end
        _schedule_end(window)
        return False
    window.ended_at = now
    window.save(update_fields=["ended_at"])
    audit.record(actor=SYSTEM, action=AuditAction.MAINTENANCE_ENDED,
                 target=f"maintenance:{window.pk}", after={"ended_at": now.isoformat()},
                 reason=f"maintenance window {window.pk} ended at {window.ends_at:%H:%M:%S} "
                        "UTC; held corrections run")
    return True


def hold_in_open_window(agent: Agent, now: datetime, decision: Any,
                        findings: dict[str, Any]) -> datetime | None:
    """Inside a pass (through registry.holds): the window covering `agent` at `now` holds the
    corrections it does not allow; its end when it held any (the pass comes back then), None
    when no window covers the agent or it held nothing."""
    window = window_for(agent, now)
    if window is None or not hold_for_window(agent, window, decision, findings):
        return None
    return window.ends_at


def hold_for_window(agent: Agent, window: MaintenanceWindow, decision: Any,
                    findings: dict[str, Any]) -> int:
    """Inside a pass: keep the corrections the window does not allow from running (their
    findings stay open; one audit row per finding and window). How many were held."""
    allowed = set(window.allowed)
    held = [s.drift for s in decision.apply if str(s.operation.op) not in allowed]
    decision.apply = [s for s in decision.apply if str(s.operation.op) in allowed]
    if OperationKind.SUSPEND.value not in allowed:
        held.extend(decision.block)
        decision.block = []

    for drift in held:
        finding = findings[drift.fingerprint]
        target = f"finding:{finding.pk}"
        if AuditEntry.objects.filter(agent=agent.name, action=AuditAction.MAINTENANCE_HELD,
                                     target=target, after__window=window.pk).exists():
            continue
        audit.record(actor=SYSTEM, action=AuditAction.MAINTENANCE_HELD, target=target,
                     agent=agent.name, after={"window": window.pk,
                                              "operation": drift.operation.to_dict(),
                                              "until": window.ends_at.isoformat()},
                     reason=f"maintenance window {window.pk} ({window.reason}): the correction "
                            f"waits until {window.ends_at:%Y-%m-%d %H:%M:%S} UTC")
    return len(held)


