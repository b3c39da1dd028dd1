"""Silence: an agent not heard from for longer than its expected heartbeat turns
`Ready=Unknown` (reason `Silent`) and raises one alert; it clears, audited, when the agent is
heard again. Heard means any sign of life: a reported or read observed state (a heartbeat
moves its last_seen_at), a behaviour event received, or a runtime decision asked. An agent
busy sending events is alive even when it has not reported its state for a while; the agent
page says which it last heard and when (`heard_line`).

The expected heartbeat is the spec's `heartbeat`, or the default of its connector kind
(HEARTBEAT_PUSH_SECONDS, HEARTBEAT_HTTP_SECONDS, HEARTBEAT_SANDBOX_SECONDS; 0 never). The
scheduled job (`find_silent_agents`) judges the fleet in a fixed number of queries whatever
its size; each silence it starts or ends then writes its own rows."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, OuterRef, Subquery, Value
from django.utils import timezone

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from reconciliation import alerts
from reconciliation.agent_status import refresh_status
from reconciliation.models import ObservedState, Silence
from registry.choices import Lifecycle
from registry.manifest import duration_seconds
from registry.models import Agent


def heartbeat_seconds(spec: dict[str, Any] | None, connector: dict[str, Any] | None) -> int:
    """The longest this agent may go unheard: its spec's heartbeat, else its connector's."""
    if spec and spec.get("heartbeat"):
        return duration_seconds(spec["heartbeat"])
    kind = (connector or {}).get("type", "push")
    return {"http": settings.HEARTBEAT_HTTP_SECONDS,
            "sandbox": settings.HEARTBEAT_SANDBOX_SECONDS}.get(kind,
                                                               settings.HEARTBEAT_PUSH_SECONDS)


def is_silent(now: datetime, expected: int, heard: datetime | None) -> bool:
    """Unheard (no report, event or decision) for longer than `expected`. Never heard at all
    is not silence: not started yet."""
    return bool(expected) and heard is not None and now - heard > timedelta(seconds=expected)


@dataclass(frozen=True)
class Candidate:
    """One agent the job judges, with the last time it was heard each way."""

    name: str
    agent_id: int | None
    expected: int
    reported: datetime | None  # its last observed-state report (a heartbeat)
    event: datetime | None = None  # the last behaviour event received from it
    decision: datetime | None = None  # the last runtime decision it asked

    @property
    def heard(self) -> datetime | None:
        """Its last sign of life, of any kind."""
        return max((t for t in (self.reported, self.event, self.decision) if t), default=None)


# The signs of life besides a report, kept by runtime (behaviour events, runtime decisions),
# which registers them from its AppConfig.ready (runtime/signs_of_life.py): per sign, a
# subquery over an agent's pk giving when it was last heard that way.
SIGNS = ("event", "decision")
_signs: dict[str, Callable[[], Subquery]] = {}
# The agents heard in traffic that the registry does not know: (name, last report, last heard).
_shadows: list[Callable[[], Iterable[tuple[str, datetime | None, datetime | None]]]] = []


def hear_from(sign: str, last_heard: Callable[[], Subquery]) -> None:
    """Count `sign` (one of SIGNS) as a sign of life, last heard at `last_heard()`."""
    if sign not in SIGNS:
        raise ValueError(f"unknown sign of life {sign!r}: one of {', '.join(SIGNS)}")
    _signs[sign] = last_heard


def watch_shadows(
        shadows: Callable[[], Iterable[tuple[str, datetime | None, datetime | None]]]) -> None:
    """Watch the unregistered agents `shadows()` lists for silence too."""
    _shadows[:] = [shadows]


def _history() -> Any:  # a queryset of ObservedState
    """The observed states of the agent of the outer query (OuterRef "pk"), latest first."""
    return ObservedState.objects.filter(agent=OuterRef("pk")).order_by("-observed_at")


def _last_report() -> Subquery:
    """When the agent of the outer query last reported (a heartbeat moves it)."""
    return Subquery(_history().values("last_seen_at")[:1])


def _signs_of_life() -> dict[str, Any]:
    """Per agent: its last report, and when each registered sign of life was last heard (none
    when nothing registered it: nothing was heard that way)."""
    return {
        "reported": _last_report(),
        **{sign: _signs[sign]() if sign in _signs else Value(None, DateTimeField())
           for sign in SIGNS},
    }


def _candidates() -> list[Candidate]:
    """Every live registered agent and every unregistered one seen in traffic, with when it
    was last heard each way (two queries)."""
    rows = (Agent.objects.filter(active_version__isnull=False, lifecycle=Lifecycle.ACTIVE)
            .annotate(**_signs_of_life())
            .values_list("pk", "name", "connector", "active_version__spec", "reported",
                         "event", "decision"))
    found = [Candidate(name, pk, heartbeat_seconds(spec, connector), reported, event, decision)
             for pk, name, connector, spec, reported, event, decision in rows]
    found += [Candidate(name, None, settings.HEARTBEAT_PUSH_SECONDS, reported, last)
              for shadows in _shadows for name, reported, last in shadows()]
    return found


@dataclass(frozen=True)
class Heard:
    """What an agent's page says of when it was last heard, each way."""

    expected: int
    reported: datetime | None
    event: datetime | None
    decision: datetime | None

    def line(self, now: datetime) -> str:
        """"last event 3 s ago; no observed-state report for 40 min": the signs of life
        freshest first, then the report when it is the one missing."""
        if not (self.reported or self.event or self.decision):
            return "nothing heard yet"
        late = bool(self.reported and self.expected
                    and now - self.reported > timedelta(seconds=self.expected))
        fresh = [(at, f"{what} {roughly(now - at)} ago") for at, what in (
            (self.event, "last event"), (self.decision, "last decision asked"),
            (None if late else self.reported, "last observed-state report")) if at]
        said = [text for _, text in sorted(fresh, key=lambda pair: pair[0], reverse=True)]
        if late:
            said.append(f"no observed-state report for {roughly(now - self.reported)}")
        elif not self.reported:
            said.append("no observed-state report yet")
        return "; ".join(said)


def heard(agent: Agent) -> Heard:
    """When `agent` was last heard each way (one query)."""
    row = (Agent.objects.filter(pk=agent.pk).annotate(**_signs_of_life())
           .values("connector", "active_version__spec", "reported", "event", "decision").get())
    return Heard(heartbeat_seconds(row["active_version__spec"], row["connector"]),
                 row["reported"], row["event"], row["decision"])


def roughly(span: timedelta) -> str:
    """A span in its largest whole unit: "3 s", "40 min", "2 h", "5 d"."""
    seconds = max(int(span.total_seconds()), 0)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _refresh(agent_id: int | None, now: datetime) -> None:
    if agent_id is None:
        return
    refresh_status(Agent.objects.select_related("owner").get(pk=agent_id), now=now)


def _start(candidate: Candidate, now: datetime) -> Silence:
    silence = Silence.objects.create(agent_id=candidate.agent_id, agent_name=candidate.name,
                                     expected_seconds=candidate.expected,
                                     last_heard_at=candidate.heard, started_at=now)
    reason = (f"nothing heard (no report, event or decision) for more than "
              f"{candidate.expected} s")
    audit.record(actor=SYSTEM, action=AuditAction.AGENT_SILENT,
                 target=f"agent:{candidate.name}", agent=candidate.name,
                 after=silence.to_dict(), reason=reason)
    alerts.broadcast(AlertKind.AGENT_SILENT, {"agent": candidate.name, "severity": "medium",
                                      "message": reason, "link": f"/agents/{candidate.name}/"
                                      if candidate.agent_id else "/fleet/"})
    _refresh(candidate.agent_id, now)
    return silence


def end_silence(silence: Silence, now: datetime, *, reason: str) -> None:
    """Close an open silence (audited, alerted) and put the agent's Ready back."""
    before = silence.to_dict()
    silence.ended_at = now
    silence.save(update_fields=["ended_at"])
    audit.record(actor=SYSTEM, action=AuditAction.AGENT_HEARD_AGAIN,
                 target=f"agent:{silence.agent_name}", agent=silence.agent_name,
                 before=before, after=silence.to_dict(), reason=reason)
    alerts.broadcast(AlertKind.AGENT_HEARD_AGAIN, {"agent": silence.agent_name, "message": reason})
    _refresh(silence.agent_id, now)


def clear_on_report(agent: Agent, now: datetime) -> None:
    """The agent reported: an open silence ends now (called inside the report's
    transaction)."""
    silence = (Silence.objects.select_for_update(no_key=True)
               .filter(agent_name=agent.name, ended_at__isnull=True).first())
    if silence is not None:
        end_silence(silence, now, reason="reported its state again")


@transaction.atomic
def find_silent_agents(now: datetime | None = None) -> dict[str, int]:
    """Start a silence for each agent unheard for too long (one alert each), end the ones
    heard again or no longer watched. Returns counts."""
    now = now or timezone.now()
    # The open silences first, then when each agent was last heard: a report ending a silence
    # holds that silence's row until it commits, so the job waits for it and then reads the
    # report (read the other way round, it judged the agent by the report before and started
    # a second silence just after the report ended the first).
    open_ = {s.agent_name: s for s in Silence.objects.select_for_update(no_key=True)
             .filter(ended_at__isnull=True)}
    candidates = {c.name: c for c in _candidates()}
    started = ended = 0
    for candidate in _reported_again([c for name, c in sorted(candidates.items())
                                      if name not in open_
                                      and is_silent(now, c.expected, c.heard)]):
        if is_silent(now, candidate.expected, candidate.heard):
            _start(candidate, now)
            started += 1
    for name, silence in sorted(open_.items()):
        candidate = candidates.get(name)
        heard_again = candidate is not None and candidate.heard is not None and (
            silence.last_heard_at is None or candidate.heard > silence.last_heard_at)
        if candidate is None or heard_again or not is_silent(
                now, candidate.expected, candidate.heard):
            end_silence(silence, now, reason=_heard_again(candidate, silence) if heard_again
                        else "no longer watched (retired, suspended or heartbeat off)")
            ended += 1
    return {"started": started, "ended": ended, "silent": len(open_) + started - ended}


def _reported_again(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates with their registered agents' reports read again under the lock a report
    takes (on the agent's latest observed state): a report under way is waited for, so a
    silence never starts just after the agent reported (the report found no silence to end).
    Two queries, whatever their number."""
    ids = [c.agent_id for c in candidates if c.agent_id is not None]
    if not ids:
        return candidates
    agents = Agent.objects.filter(pk__in=ids)
    latest = agents.annotate(latest=Subquery(_history().values("pk")[:1])).values("latest")
    list(ObservedState.objects.select_for_update(no_key=True).filter(pk__in=latest)
         .values_list("pk"))
    # read again after the lock: a report of a changed state adds a row that read could not see
    reported = dict(agents.annotate(reported=_last_report()).values_list("pk", "reported"))
    return [replace(c, reported=reported.get(c.agent_id) or c.reported) for c in candidates]


def _heard_again(candidate: Candidate, silence: Silence) -> str:
    """What ended the silence: the freshest sign of life since it began."""
    since = silence.last_heard_at
    if candidate.reported and (since is None or candidate.reported > since):
        return "reported its state again"
    if candidate.event and (since is None or candidate.event > since):
        return "sent events again"
    return "asked for a decision again"
