"""The backtest of a proposal: before approving, what it would have allowed or flagged over
the agent's last days of events, judged by the same rules as live ingest
(behaviour.replay). Bounded: at most BACKTEST_MAX_EVENTS of the latest events are replayed,
and the result says when it was capped."""

import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from reconciliation.behaviour import backtest, covers
from reconciliation.choices import DecisionStatus
from reconciliation.events import Event
from reconciliation.models import BehaviourEvent, Decision
from registry.actions.waivers import active_waivers
from registry.grant_clocks import start_clocks
from registry.models import DesiredStateVersion

BACKTEST_DAYS = 7


def run_backtest(version: DesiredStateVersion) -> dict[str, Any]:
    """The backtest of one proposal (shared by the API and the proposal page)."""
    agent = version.agent
    now = timezone.now()
    since = now - timedelta(days=BACKTEST_DAYS)
    cap = settings.BACKTEST_MAX_EVENTS
    recent = BehaviourEvent.objects.filter(agent=agent, ts__gte=since, ts__lte=now)
    rows = list(recent.order_by("-ts", "-pk").values_list(
        "event_id", "ts", "kind", "tool", "resource", "record", "action", "amount",
        "decision_id")[:cap + 1])
    capped = len(rows) > cap
    total = recent.count() if capped else len(rows)
    rows = rows[:cap]
    rows.reverse()
    events = [Event(id=event_id, agent=agent.name, ts=ts, kind=kind, tool=tool,
                    resource=resource, record=record, action=action, amount=amount,
                    decision_id=decision_id)
              for event_id, ts, kind, tool, resource, record, action, amount, decision_id
              in rows]
    active = agent.active_version.spec if agent.active_version_id else None
    proposed, _ = start_clocks(version.spec, now)  # grants counted from approval: from now
    waived = tuple(w.pointer for w in active_waivers(agent, now))
    result = backtest(active, proposed, events, _sign_offs(agent, events), waived)
    return {"days": BACKTEST_DAYS, "since": since, "events": len(events), "total": total,
            "capped": capped, "cap": cap, **result}


def _sign_offs(agent: Any, events: list[Event]) -> dict[str, tuple[bool, bool]]:
    """(signed off, reused) for past events that named a decision: signed off when a human's
    allow was used by that very event, reused when it was already used by another."""
    named = {}
    for event in events:
        if event.decision_id:
            try:
                named[event.id] = uuid.UUID(event.decision_id)
            except ValueError:
                continue
    decisions = {d.pk: d for d in Decision.objects.filter(agent=agent,
                                                           pk__in=set(named.values()))}
    signed = {}
    for event in events:
        decision = decisions.get(named.get(event.id))
        if decision is None or not covers(decision.request, event):
            continue
        if decision.used_by_event == event.id:
            signed[event.id] = (True, False)
        elif decision.status == DecisionStatus.USED:
            signed[event.id] = (False, True)
    return signed
