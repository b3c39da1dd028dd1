"""The stop button: compliance (or an admin) stops the whole fleet, a team, a label selector or
one owner's agents at once, and two people lift it.

Placing a stop marks every agent it reaches suspended in one transaction (so every decision is
denied and every desired-state answer says `running: false`), wakes their held long-polls after
commit (their adapters and MCP proxies refuse calls at once), closes their pending decisions as
deny, and queues a job that suspends each on its platform through its connector. One audit row
names the stop, its person, its reason and every agent it suspended (one per agent would hold
the stop's commit for a fleet of thousands); the job writes one per agent as each platform
follows. The stop row
itself is read at the decision point and by the desired-state answer too, so an agent a human
resumes, or one registered into the scope later, stays refused while the stop stands.

Lifting takes two people: one asks (with a reason), a second compliance person or admin
approves; only then are the agents this stop suspended resumed (those another stop or a block
still holds stay suspended) and a job resumes them on their platforms."""

import logging
from typing import Any

import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

import audit
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from compliance.choices import StopScope
from compliance.models import Stop
from compliance.stops import active_stops, stop_covering
from config import queues
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from reconciliation.alerts import broadcast
from reconciliation.choices import DecisionOutcome, DecisionStatus, FindingStatus
from reconciliation.fleet_snapshot import request_refresh
from reconciliation.models import Finding
from registry.choices import Lifecycle, Role
from registry.desired_push import channel
from registry.models import Agent
from registry.roles import has_role
from runtime.actions.decisions import _close
from runtime.models import Decision

log = logging.getLogger(__name__)

MAX_REASON = 1000
MAX_SELECTOR_LABELS = 16


def _stopper(actor: Any, doing: str) -> None:
    if not getattr(actor, "pk", None) or not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed(f"Only compliance staff or an admin {doing}.")


def _reason(reason: Any, pointer: str = "/reason") -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise Invalid("Say why: a stop and its lift are audited with their reason.",
                      details=[{"pointer": pointer, "message": "required"}])
    if len(reason) > MAX_REASON:
        raise Invalid("The reason is too long.", details=[
            {"pointer": pointer, "message": f"at most {MAX_REASON} characters"}])
    return reason.strip()


def _label_value(value: Any, pointer: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 63:
        raise Invalid("A label value is a non-empty string of at most 63 characters.",
                      details=[{"pointer": pointer, "message": "expected a label value"}])
    return value


def _scope(scope: Any, team: Any, selector: Any, owner: Any
           ) -> tuple[str, dict[str, str], User | None]:
    """(scope, selector, owner) as stored, or Invalid naming the field that is wrong."""
    if scope not in StopScope.values:
        raise Invalid("Say what to stop.", details=[
            {"pointer": "/scope", "message": f"one of {', '.join(StopScope.values)}"}])
    if scope == StopScope.TEAM:
        return scope, {"team": _label_value(team, "/team")}, None
    if scope == StopScope.SELECTOR:
        if not isinstance(selector, dict) or not selector or len(selector) > MAX_SELECTOR_LABELS:
            raise Invalid("A selector names 1 to 16 labels.", details=[
                {"pointer": "/selector", "message": "expected an object of label values"}])
        for key in selector:
            if not isinstance(key, str) or not 0 < len(key) <= 63:
                raise Invalid("A label name is a non-empty string of at most 63 characters.",
                              details=[{"pointer": "/selector", "message": "bad label name"}])
        return scope, {k: _label_value(v, f"/selector/{k}") for k, v in selector.items()}, None
    if scope == StopScope.OWNER:
        person = (User.objects.filter(username=owner, is_active=True).first()
                  if isinstance(owner, str) and owner else None)
        if person is None:
            raise Invalid("Name the owner whose agents to stop.", details=[
                {"pointer": "/owner", "message": "no such person"}])
        return scope, {}, person
    return scope, {}, None


def _announce_all(names: list[str]) -> None:
    """After commit, wake every named agent's held long-poll (one connection, one round trip)."""

    def publish() -> None:
        try:
            client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5,
                                          socket_connect_timeout=2)
            with client.pipeline(transaction=False) as pipe:
                for name in names:
                    pipe.publish(channel(name), b"1")
                pipe.execute()
        except redis.RedisError as error:
            # The stop is committed; held polls find it at their next recheck.
            log.warning("could not announce the stop to %d agents: %s", len(names), error)

    transaction.on_commit(publish, robust=True)


def _enqueue(job: str, stop_id: int) -> None:
    def enqueue() -> None:
        queues.queue("default").enqueue(job, stop_id)

    transaction.on_commit(enqueue, robust=True)


@transaction.atomic
def place_stop(*, actor: Any, scope: Any, reason: Any, team: Any = None, selector: Any = None,
               owner: Any = None) -> Stop:
    """Stop every agent in the scope at once (see the module's docstring)."""
    _stopper(actor, "press the stop button")
    scope, labels, person = _scope(scope, team, selector, owner)
    reason = _reason(reason)
    now = timezone.now()
    stop = Stop(scope=scope, selector=labels, owner=person, reason=reason, stopped_by=actor,
                stopped_at=now)
    reached = [a for a in Agent.objects.select_related("owner").exclude(
        lifecycle=Lifecycle.RETIRED).order_by("name") if stop.covers(a)]
    suspended = [a for a in reached if a.lifecycle == Lifecycle.ACTIVE]
    stop.agents = [a.name for a in suspended]  # the ones this stop suspended, to resume
    stop.save()
    Agent.objects.filter(pk__in=[a.pk for a in suspended]).update(
        lifecycle=Lifecycle.SUSPENDED, updated_at=now)
    said = f"stop {stop.pk} by {actor.username}: {reason}"
    audit.record(actor=actor, action=AuditAction.STOP_PLACED, target=f"stop:{stop.pk}",
                 after={"scope": scope, "selector": labels,
                        "owner": person.username if person else None,
                        "agents": [a.name for a in reached],
                        "suspended": stop.agents}, reason=reason)
    _deny_pending(reached, actor=actor, said=said)
    broadcast(AlertKind.FLEET_STOPPED, {"severity": "high", "stop": stop.pk,
                                "message": f"{stop.describe()} stopped: {reason}",
                                "agents": len(reached), "link": "/"})
    request_refresh()
    _announce_all([a.name for a in reached])
    _enqueue("compliance.jobs.enforce_stop_job", stop.pk)
    return stop


def _deny_pending(agents: list[Agent], *, actor: Any, said: str) -> None:
    """Pending decisions of stopped agents end as deny: nobody may sign them off meanwhile."""
    pending = (Decision.objects.select_for_update(no_key=True, of=("self",)).select_related("agent")
               .filter(agent__in=agents, status=DecisionStatus.PENDING).order_by("created_at"))
    for decision in pending:
        _close(decision, actor=actor, status=DecisionStatus.REJECTED,
               outcome=DecisionOutcome.DENY, comment=said)


def _active_stop(stop_id: Any) -> Stop:
    stop = (Stop.objects.select_for_update(no_key=True, of=("self",)).select_related(
        "stopped_by", "owner", "lift_requested_by").filter(pk=stop_id).first()
        if isinstance(stop_id, int) or str(stop_id).isdigit() else None)
    if stop is None:
        raise NotFound(f"No stop {stop_id}.")
    if not stop.active:
        raise Conflict(f"Stop {stop.pk} was lifted already.", code="lifted")
    return stop


@transaction.atomic
def request_lift(stop_id: Any, *, actor: Any, reason: Any) -> Stop:
    """The first of two people asks to lift a stop; nothing runs again until a second
    approves."""
    _stopper(actor, "ask to lift a stop")
    reason = _reason(reason)
    stop = _active_stop(stop_id)
    if stop.lift_requested_by_id is not None:
        raise Conflict(f"{stop.lift_requested_by.username} asked to lift stop {stop.pk} "
                       "already: a second person approves it.", code="lift_requested")
    stop.lift_requested_by, stop.lift_requested_at = actor, timezone.now()
    stop.lift_reason = reason
    stop.save(update_fields=["lift_requested_by", "lift_requested_at", "lift_reason"])
    audit.record(actor=actor, action=AuditAction.STOP_LIFT_REQUESTED, target=f"stop:{stop.pk}",
                 before={"active": True}, after={"lift_requested_by": actor.username},
                 reason=reason)
    return stop


@transaction.atomic
def approve_lift(stop_id: Any, *, actor: Any) -> Stop:
    """A second person approves the lift: the agents this stop suspended run again, unless
    another stop or a block still holds them."""
    _stopper(actor, "approve lifting a stop")
    stop = _active_stop(stop_id)
    if stop.lift_requested_by_id is None:
        raise Conflict(f"Nobody asked to lift stop {stop.pk}: ask first, then a second "
                       "person approves.", code="lift_not_requested")
    if stop.lift_requested_by_id == actor.pk:
        raise NotAllowed("Four eyes: a second person approves the lift you asked for.",
                         code="four_eyes")
    now = timezone.now()
    stop.lifted_by, stop.lifted_at = actor, now
    stop.save(update_fields=["lifted_by", "lifted_at"])
    others = active_stops()
    blocked = set(Finding.objects.filter(agent__name__in=stop.agents,
                                         status=FindingStatus.BLOCKED)
                  .values_list("agent__name", flat=True))
    resumed = [a for a in Agent.objects.select_related("owner").filter(
        name__in=stop.agents, lifecycle=Lifecycle.SUSPENDED).order_by("name")
        if a.name not in blocked and stop_covering(a, others) is None]
    Agent.objects.filter(pk__in=[a.pk for a in resumed]).update(lifecycle=Lifecycle.ACTIVE,
                                                                 updated_at=now)
    audit.record(actor=actor, action=AuditAction.STOP_LIFTED, target=f"stop:{stop.pk}",
                 before={"active": True},
                 after={"active": False, "lift_requested_by": stop.lift_requested_by.username,
                        "lifted_by": actor.username, "resumed": [a.name for a in resumed]},
                 reason=stop.lift_reason)
    request_refresh()
    reached = [a.name for a in Agent.objects.exclude(lifecycle=Lifecycle.RETIRED)
               .select_related("owner") if stop.covers(a)]
    _announce_all(reached)
    _enqueue("compliance.jobs.release_stop_job", stop.pk)
    return stop
