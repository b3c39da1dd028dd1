"""Silence: an agent not heard from for longer than its expected heartbeat turns
`Ready=Unknown` (reason `Silent`) and raises one alert; it clears, audited, when the agent
reports again. Heard means a reported or read observed state (a heartbeat moves its
last_seen_at); events alone are traffic, not a heartbeat, so an agent seen in traffic that
never reports its state goes silent once its first event is older than its heartbeat.

The expected heartbeat is the spec's `heartbeat`, or the default of its connector kind
(HEARTBEAT_PUSH_SECONDS, HEARTBEAT_HTTP_SECONDS, HEARTBEAT_SANDBOX_SECONDS; 0 never). The
scheduled job (`find_silent_agents`) works in a fixed number of queries whatever the fleet."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

import audit
from audit.choices import AuditAction
from reconciliation import alerts
from reconciliation.choices import ConditionType
from reconciliation.models import BehaviourEvent, ObservedState, Silence, UnregisteredAgent
from registry.choices import Lifecycle
from registry.manifest import duration_seconds
from registry.models import Agent

SILENT_REASON = "Silent"


def heartbeat_seconds(spec: dict[str, Any] | None, connector: dict[str, Any] | None) -> int:
    """The longest this agent may go unheard: its spec's heartbeat, else its connector's."""
    if spec and spec.get("heartbeat"):
        return duration_seconds(spec["heartbeat"])
    kind = (connector or {}).get("type", "push")
    return {"http": settings.HEARTBEAT_HTTP_SECONDS,
            "sandbox": settings.HEARTBEAT_SANDBOX_SECONDS}.get(kind,
                                                               settings.HEARTBEAT_PUSH_SECONDS)


def is_silent(now: datetime, expected: int, heard: datetime | None,
              first_traffic: datetime | None) -> bool:
    """Unheard for longer than `expected` since the last heartbeat, or (never heartbeated)
    since it was first seen in traffic. Never seen at all is not silence: not started yet."""
    since = heard or first_traffic
    return bool(expected) and since is not None and now - since > timedelta(seconds=expected)


@dataclass(frozen=True)
class Candidate:
    """One agent the job judges."""

    name: str
    agent_id: int | None
    expected: int
    heard: datetime | None
    first_traffic: datetime | None


def _candidates() -> list[Candidate]:
    """Every live registered agent and every unregistered one seen in traffic, with when it
    was last heard and first seen in traffic (two queries)."""
    heard = (ObservedState.objects.filter(agent=OuterRef("pk")).order_by("-observed_at")
             .values("last_seen_at")[:1])
    first_event = (BehaviourEvent.objects.filter(agent=OuterRef("pk"), foreign=False)
                   .order_by("ts").values("received_at")[:1])
    rows = (Agent.objects.filter(active_version__isnull=False, lifecycle=Lifecycle.ACTIVE)
            .annotate(heard=Subquery(heard), first_event=Subquery(first_event))
            .values_list("pk", "name", "connector", "active_version__spec", "heard",
                         "first_event"))
    found = [Candidate(name, pk, heartbeat_seconds(spec, connector), last, first)
             for pk, name, connector, spec, last, first in rows]
    shadow_heard = (ObservedState.objects.filter(unregistered=OuterRef("pk"))
                    .order_by("-observed_at").values("last_seen_at")[:1])
    shadows = (UnregisteredAgent.objects.filter(registered=False, events__gt=0)
               .annotate(heard=Subquery(shadow_heard))
               .values_list("name", "heard", "first_seen"))
    found += [Candidate(name, None, settings.HEARTBEAT_PUSH_SECONDS, last, first)
              for name, last, first in shadows]
    return found


def overlay(conditions: list[dict[str, Any]], silence: Silence | None) -> list[dict[str, Any]]:
    """Ready=Unknown, reason Silent, while a silence is open: what the agent does now is not
    known, whatever the last pass concluded."""
    if silence is None:
        return conditions
    message = (f"not heard from since {silence.to_dict()['last_heard_at']}"
               if silence.last_heard_at else "seen in traffic, never reported its state")
    message += f" (expected every {silence.expected_seconds} s)"
    since = silence.started_at.isoformat().replace("+00:00", "Z")
    return [{**c, "status": "Unknown", "reason": SILENT_REASON, "message": message,
             "lastTransitionTime": since} if c["type"] == ConditionType.READY else c
            for c in conditions]


def _system() -> str:
    # imported here: reconciliation.actions imports the passes, which import this module
    from reconciliation.actions.common import SYSTEM

    return SYSTEM


def _refresh(agent_id: int | None, now: datetime) -> None:
    if agent_id is None:
        return
    from reconciliation.actions.settle import refresh_status

    refresh_status(Agent.objects.select_related("owner").get(pk=agent_id), now=now)


def _start(candidate: Candidate, now: datetime) -> Silence:
    silence = Silence.objects.create(agent_id=candidate.agent_id, agent_name=candidate.name,
                                     expected_seconds=candidate.expected,
                                     last_heard_at=candidate.heard, started_at=now)
    reason = (f"not heard from for more than {candidate.expected} s" if candidate.heard
              else f"seen in traffic for more than {candidate.expected} s without reporting")
    audit.record(actor=_system(), action=AuditAction.AGENT_SILENT,
                 target=f"agent:{candidate.name}", agent=candidate.name,
                 after=silence.to_dict(), reason=reason)
    alerts.broadcast("agent.silent", {"agent": candidate.name, "severity": "medium",
                                      "message": reason, "link": f"/agents/{candidate.name}/"
                                      if candidate.agent_id else "/fleet/"})
    _refresh(candidate.agent_id, now)
    return silence


def end_silence(silence: Silence, now: datetime, *, reason: str) -> None:
    """Close an open silence (audited, alerted) and put the agent's Ready back."""
    before = silence.to_dict()
    silence.ended_at = now
    silence.save(update_fields=["ended_at"])
    audit.record(actor=_system(), action=AuditAction.AGENT_HEARD_AGAIN,
                 target=f"agent:{silence.agent_name}", agent=silence.agent_name,
                 before=before, after=silence.to_dict(), reason=reason)
    alerts.broadcast("agent.heard_again", {"agent": silence.agent_name, "message": reason})
    _refresh(silence.agent_id, now)


def clear_on_report(agent: Agent, now: datetime) -> None:
    """The agent reported: an open silence ends now (called inside the report's
    transaction)."""
    silence = (Silence.objects.select_for_update()
               .filter(agent_name=agent.name, ended_at__isnull=True).first())
    if silence is not None:
        end_silence(silence, now, reason="reported its state again")


@transaction.atomic
def find_silent_agents(now: datetime | None = None) -> dict[str, int]:
    """Start a silence for each agent unheard for too long (one alert each), end the ones
    heard again or no longer watched. Returns counts."""
    now = now or timezone.now()
    candidates = {c.name: c for c in _candidates()}
    open_ = {s.agent_name: s for s in Silence.objects.select_for_update()
             .filter(ended_at__isnull=True)}
    started = ended = 0
    for name, candidate in sorted(candidates.items()):
        silent = is_silent(now, candidate.expected, candidate.heard, candidate.first_traffic)
        if silent and name not in open_:
            _start(candidate, now)
            started += 1
    for name, silence in sorted(open_.items()):
        candidate = candidates.get(name)
        heard_again = candidate is not None and candidate.heard is not None and (
            silence.last_heard_at is None or candidate.heard > silence.last_heard_at)
        if candidate is None or heard_again or not is_silent(
                now, candidate.expected, candidate.heard, candidate.first_traffic):
            end_silence(silence, now, reason="reported its state again" if heard_again
                        else "no longer watched (retired, suspended or heartbeat off)")
            ended += 1
    return {"started": started, "ended": ended, "silent": len(open_) + started - ended}
