"""The loop's answers to what the registry announces (registry/signals.py), connected by
ReconciliationConfig.ready: the registry sits below reconciliation and calls none of this."""

from datetime import datetime
from typing import Any

from reconciliation.actions import recertification
from reconciliation.actions.retirement import retired
from reconciliation.alerts import broadcast
from reconciliation.controller.triggers import request_reconcile
from reconciliation.fleet_snapshot import request_refresh
from reconciliation.toxic_path_requests import request_path_check
from registry import signals


def reconcile(agent_id: int, trigger: str, **kwargs: Any) -> None:
    """A pass after commit (what it must do later, a grant's end or a waiver's lapse, it
    asks its controller for itself)."""
    request_reconcile(agent_id, trigger)


def refresh_fleet(**kwargs: Any) -> None:
    """The fleet view, refreshed after commit."""
    request_refresh()


def check_paths(**kwargs: Any) -> None:
    """The toxic-path check, after commit."""
    request_path_check()


def alert(event: str, payload: dict[str, Any], **kwargs: Any) -> None:
    """A live alert, recorded in the sender's transaction."""
    broadcast(event, payload)


def retire(agent_id: int, **kwargs: Any) -> None:
    """Marked retired now; stopped on its platform after commit."""
    retired(agent_id)


def review_changed(agent: Any, now: datetime, **kwargs: Any) -> None:
    """The Recertified condition, now."""
    recertification.refresh_condition(agent, now)


def recertified(agent: Any, actor: Any, version: Any, now: datetime, **kwargs: Any) -> None:
    """Its recertification escalations are resolved."""
    recertification.close_escalations(agent, actor=actor, version=version, now=now)


def review_overdue(agent: Any, why: str, effect: str, now: datetime, **kwargs: Any) -> None:
    """An escalation, an alert, and a suspension when the guardrails say so."""
    recertification.escalate_overdue(agent, why=why, effect=effect, now=now)


def connect() -> None:
    """Connect every receiver once (dispatch_uid: ready may run again in tests)."""
    for signal, receiver in ((signals.reconcile_requested, reconcile),
                             (signals.fleet_changed, refresh_fleet),
                             (signals.toxic_rules_changed, check_paths),
                             (signals.alert_raised, alert),
                             (signals.agent_retired, retire),
                             (signals.review_changed, review_changed),
                             (signals.recertified, recertified),
                             (signals.review_overdue, review_overdue)):
        signal.connect(receiver, dispatch_uid=f"reconciliation.{receiver.__name__}")
