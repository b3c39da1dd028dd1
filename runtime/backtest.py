"""The backtest of a proposal: before approving, what it would have allowed or flagged over
the agent's last days of events, judged by the same rules as live ingest
(behaviour.replay). Bounded: at most BACKTEST_MAX_EVENTS of the latest events are replayed,
and the result says when it was capped."""

import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from reconciliation.choices import DecisionStatus
from registry.actions.waivers import active_waivers
from registry.grant_clocks import start_clocks
from registry.models import DesiredStateVersion
from registry.permission_diff import ENFORCEMENT_STRENGTH
from runtime.behaviour import backtest, covers
from runtime.events import Event
from runtime.models import BehaviourEvent, Decision

BACKTEST_DAYS = 7


def run_backtest(version: DesiredStateVersion) -> dict[str, Any]:
    """The backtest of one proposal (shared by the API and the proposal page)."""
    agent = version.agent
    now = timezone.now()
    since = now - timedelta(days=BACKTEST_DAYS)
    cap = settings.BACKTEST_MAX_EVENTS
    # Foreign events (others' word about the agent, sent before it was registered) are left
    # out, as they are from its rules.
    recent = BehaviourEvent.objects.filter(agent=agent, foreign=False, ts__gte=since,
                                           ts__lte=now)
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
    result["changes"] += _enforcement_changes(active, version.spec, result["rules"])
    return {"days": BACKTEST_DAYS, "since": since, "events": len(events), "total": total,
            "capped": capped, "cap": cap, **result,
            "not_replayed": [change for change in version.permission_changes
                             if change["area"] in NOT_REPLAYED]}


# What past events cannot show: who owns the agent, which guardrails its labels select, and
# which platform its connector trusts, budgets, heartbeat and the review date. The backtest
# lists them so nobody reads "no change".
NOT_REPLAYED = ("owner", "labels", "connector", "budgets", "heartbeat", "review")


def _mode(spec: dict | None, area: str) -> str:
    enforcement = (spec or {}).get("enforcement") or {}
    return enforcement.get(area) or enforcement.get("default") or "correct"


def _enforcement_changes(active: dict | None, proposed: dict,
                         rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the proposal's behaviour enforcement would have done with the events the rules
    flagged: "would have logged 12 flagged events instead of blocking the agent"."""
    was, now = _mode(active, "behaviour"), _mode(proposed, "behaviour")
    flagged = sum(rule["proposed"] for rule in rules)
    if active is None or was == now or not flagged:
        return []
    done = {"correct": "corrected", "block": "suspended the agent over", "escalate":
            "escalated to a human", "log": "only logged"}
    instead = {"correct": "correcting them", "block": "suspending the agent", "escalate":
               "escalating them to a human", "log": "only logging them"}
    weaker = ENFORCEMENT_STRENGTH[now] < ENFORCEMENT_STRENGTH[was]
    # counted as events enforced: fewer under the proposal when its mode is weaker
    return [{"kind": "enforcement", "pointer": "/enforcement/behaviour",
             "current": flagged if weaker else 0, "proposed": 0 if weaker else flagged,
             "mode_before": was, "mode_after": now,
             "text": f"would have {done[now]} {flagged} flagged event"
                     f"{'s' if flagged != 1 else ''} instead of {instead[was]}"}]


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
