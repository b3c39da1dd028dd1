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
from django.dispatch import Signal

from audit.alert_kinds import AlertKind
from audit.sentences import sentence
from reconciliation import alert_sender
from reconciliation.models import AlertEvent
from registry.models import Agent
from registry.roles import sees_everything

ALERTS_GROUP = "alerts"
SEVERITY_RANK = {"": 0, "low": 1, "medium": 2, "high": 3}
log = logging.getLogger(__name__)
# Sent inside the transaction that recorded an alert (`row`: its AlertEvent), so a receiver's
# own rows commit or roll back with it (the SIEM stream, siem/receivers.py).
recorded = Signal()


def send_now(message: dict[str, Any]) -> None:
    """Deliver one alert to every connected reviewer; a channel layer outage loses nothing
    (the row is kept and clients catch up by id)."""
    try:
        alert_sender.group_send(ALERTS_GROUP, {"type": "alert.message", "message": message})
    except Exception as error:  # the layer is down; catch-up delivers it later
        log.warning("alert %s not sent live: %s", message.get("id"), error)


# Every alert a change may record: the consumer's own catch-up notice is never a row.
RECORDED = frozenset(AlertKind) - {AlertKind.CATCHUP_TRUNCATED}
# Alerts about findings that one cause produced fold into one line per incident
# (reconciliation/incidents.py): the findings join the line already there.
FOLDED_EVENTS = frozenset({AlertKind.DRIFT_DETECTED, AlertKind.DRIFT_REGRESSED,
                           AlertKind.DRIFT_CORRECTED, AlertKind.ESCALATION_OPENED,
                           AlertKind.ROLLOUT_STARTED, AlertKind.ROLLOUT_SYNCED})


def broadcast(event: AlertKind, payload: dict[str, Any]) -> None:
    """Record an alert in the current transaction and send it once that commits. An alert
    about a finding whose incident already has a line for this event replaces that line: the
    new row names every finding so far and the row it `replaces` (browsers drop that one).
    A name that is not an AlertKind is refused (ValueError) before anything is written: the
    clients match on names, and one they do not know would be shown to nobody."""
    if event not in RECORDED:
        raise ValueError(f"unknown alert event {event!r}: name an AlertKind")
    event = AlertKind(event)
    payload = dict(payload)
    agent_name = payload.get("agent") or ""
    owner_id = payload.pop("owner_id", None)
    if owner_id is None and agent_name:
        owner_id = Agent.objects.filter(name=agent_name).values_list("owner_id",
                                                                     flat=True).first()
    severity = payload.get("severity") or ""
    payload = {k: v for k, v in payload.items() if k not in ("agent", "severity")}
    if event in FOLDED_EVENTS and payload.get("incident") and payload.get("finding"):
        payload, severity = _fold(event, agent_name, payload, severity)
    row = AlertEvent.objects.create(event=event.value, agent_name=agent_name, owner_id=owner_id,
                                    severity=severity, payload=payload)
    recorded.send(sender=AlertEvent, row=row)
    if "findings" in payload:
        # A later finding of the incident may replace this row in this same transaction:
        # the send reads the row at commit and finds it gone.
        pk = row.pk
        transaction.on_commit(lambda: send_row(pk))
        return
    message = row.to_message()
    transaction.on_commit(lambda: send_now(message))


def _fold(event: AlertKind, agent_name: str, payload: dict[str, Any],
          severity: str) -> tuple[dict[str, Any], str]:
    """The payload and severity of an incident's line once this finding joins it; the line it
    replaces is deleted (its findings are listed on the new one)."""
    earlier = (AlertEvent.objects.select_for_update(no_key=True)
               .filter(event=event, agent_name=agent_name,
                       payload__incident=payload["incident"]).order_by("-pk").first())
    if earlier is None:
        return {**payload, "findings": [payload["finding"]],
                "agent_link": payload.get("link") or "",
                "link": f"/findings/?incident={payload['finding']}"}, severity
    findings = [*(earlier.payload.get("findings") or [earlier.payload.get("finding")]),
                payload["finding"]]
    findings = list(dict.fromkeys(f for f in findings if f))
    if SEVERITY_RANK.get(earlier.severity, 0) > SEVERITY_RANK.get(severity, 0):
        severity = earlier.severity
    # The line reads from the incident's first finding; it now counts them all.
    first = {k: v for k, v in earlier.payload.items() if k not in ("findings", "replaces")}
    AlertEvent.objects.filter(pk=earlier.pk).delete()
    return {**first, "findings": findings, "replaces": earlier.pk}, severity


def send_row(pk: int) -> None:
    """Send an alert row as it is now; nothing when a later alert of its incident replaced it."""
    row = AlertEvent.objects.filter(pk=pk).first()
    if row is not None:
        send_now(row.to_message())


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
    return sentence(message)


def as_read_by(message: dict[str, Any], subscription: dict[str, Any]) -> dict[str, Any]:
    """A message as one reader gets it: an incident's line links to its findings for the
    reviewers, and to the agent's page for its owner (who cannot open the findings list)."""
    if subscription.get("sees_all") or not message.get("agent_link"):
        return message
    return {**message, "link": message["agent_link"]}


def subscription_for(user: Any, **choices: Any) -> dict[str, Any]:
    """A person's subscription: what they chose, and whether they see every agent's alerts."""
    return {**choices, "user_id": user.pk, "sees_all": sees_everything(user)}


def recent(user: Any, limit: int = 20) -> list[dict[str, Any]]:
    """The newest alerts `user` may see, newest first, with their feed line: the overview
    draws them so a fresh tab never shows an empty feed while there is history."""
    subscription = subscription_for(user)
    rows = AlertEvent.objects.filter(wanted_filter(subscription))
    return [as_read_by({**message, "line": describe(message)}, subscription) for message in
            (row.to_message() for row in rows.order_by("-pk")[:limit])]
