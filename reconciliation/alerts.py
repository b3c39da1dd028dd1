"""Live alerts: written in the same transaction as the change they announce (so a rolled-back
change announces nothing), sent through the Redis channel layer after commit, and kept so a
browser that lost its connection catches up by the last id it saw.

An alert's id is taken when its row is inserted, not when its transaction commits, so ids do
not arrive in order: a long transaction's alert can commit after a higher id was delivered.
Catch-up therefore re-reads a window before the last id seen (see consumers.py) and browsers
drop ids they already have.
"""

import logging
from typing import Any

from django.db import transaction
from django.db.models import Q

from reconciliation import alert_sender

ALERTS_GROUP = "alerts"
SEVERITY_RANK = {"": 0, "low": 1, "medium": 2, "high": 3}
log = logging.getLogger(__name__)


def send_now(message: dict[str, Any]) -> None:
    """Deliver one alert to every connected reviewer; a channel layer outage loses nothing
    (the row is kept and clients catch up by id)."""
    try:
        alert_sender.group_send(ALERTS_GROUP, {"type": "alert.message", "message": message})
    except Exception as error:  # the layer is down; catch-up delivers it later
        log.warning("alert %s not sent live: %s", message.get("id"), error)


def broadcast(event: str, payload: dict[str, Any]) -> None:
    """Record an alert in the current transaction and send it once that commits."""
    from reconciliation.models import AlertEvent
    from registry.models import Agent

    payload = dict(payload)
    agent_name = payload.get("agent") or ""
    owner_id = payload.pop("owner_id", None)
    if owner_id is None and agent_name:
        owner_id = Agent.objects.filter(name=agent_name).values_list("owner_id",
                                                                     flat=True).first()
    row = AlertEvent.objects.create(
        event=event, agent_name=agent_name, owner_id=owner_id,
        severity=payload.get("severity") or "",
        payload={k: v for k, v in payload.items() if k not in ("agent", "severity")})
    message = row.to_message()
    transaction.on_commit(lambda: send_now(message))


def wanted(message: dict[str, Any], subscription: dict[str, Any]) -> bool:
    """Whether a subscription (scope all | mine | agent, min_severity) wants a message. A
    person who does not review every agent (`sees_all` false: an owner) is sent alerts about
    their own agents and the cluster's, never about another owner's agent."""
    if not subscription.get("sees_all") and message.get("agent") and (
            message.get("owner_id") != subscription.get("user_id")):
        return False
    if SEVERITY_RANK.get(message.get("severity") or "", 0) < SEVERITY_RANK.get(
            subscription.get("min_severity") or "", 0):
        return False
    scope = subscription.get("scope") or "all"
    if scope == "agent":
        return message.get("agent") == subscription.get("agent")
    if scope == "mine":
        return message.get("owner_id") == subscription.get("user_id")
    return True


def wanted_filter(subscription: dict[str, Any]) -> Q:
    """`wanted` as a database filter on AlertEvent rows, for catch-up and counting."""
    condition = Q()
    if not subscription.get("sees_all"):
        condition &= Q(agent_name="") | Q(owner_id=subscription.get("user_id"))
    floor = SEVERITY_RANK.get(subscription.get("min_severity") or "", 0)
    if floor:
        condition &= Q(severity__in=[name for name, rank in SEVERITY_RANK.items()
                                     if rank >= floor])
    scope = subscription.get("scope") or "all"
    if scope == "agent":
        condition &= Q(agent_name=subscription.get("agent") or "")
    elif scope == "mine":
        condition &= Q(owner_id=subscription.get("user_id"))
    return condition


def describe(message: dict[str, Any]) -> str:
    """The feed's sentence for an alert (live ones carry it as `line`, see to_message)."""
    from audit.sentences import sentence

    return sentence(message)


def subscription_for(user: Any, **choices: Any) -> dict[str, Any]:
    """A person's subscription: what they chose, and whether they see every agent's alerts."""
    from registry.roles import sees_everything

    return {**choices, "user_id": user.pk, "sees_all": sees_everything(user)}


def recent(user: Any, limit: int = 20) -> list[dict[str, Any]]:
    """The newest alerts `user` may see, newest first, with their feed line: the overview
    draws them so a fresh tab never shows an empty feed while there is history."""
    from reconciliation.models import AlertEvent

    rows = AlertEvent.objects.filter(wanted_filter(subscription_for(user)))
    return [{**message, "line": describe(message)} for message in
            (row.to_message() for row in rows.order_by("-pk")[:limit])]
