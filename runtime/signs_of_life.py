"""runtime's signs of life for the loop's silence (reconciliation/silence.py), registered from
runtime's AppConfig.ready: an agent sending behaviour events or asking for decisions is alive
even when it has not reported its state for a while, and an unregistered agent seen in traffic
is watched too."""

from collections.abc import Iterable
from datetime import datetime

from django.db.models import OuterRef, Subquery

from reconciliation.models import ObservedState
from runtime.models import BehaviourEvent, Decision, UnregisteredAgent


def last_event() -> Subquery:
    """The receipt of an agent's latest event, by its own time (the (agent, ts) index)."""
    return Subquery(BehaviourEvent.objects.filter(agent=OuterRef("pk"), foreign=False)
                    .order_by("-ts").values("received_at")[:1])


def last_decision() -> Subquery:
    """When an agent last asked for a runtime decision."""
    return Subquery(Decision.objects.filter(agent=OuterRef("pk"))
                    .order_by("-created_at").values("created_at")[:1])


def shadows() -> Iterable[tuple[str, datetime | None, datetime | None]]:
    """Each unregistered agent seen in traffic: its name, its last report and when it was last
    heard (its last_seen moves with each batch of its events). One query."""
    heard = (ObservedState.objects.filter(unregistered=OuterRef("pk"))
             .order_by("-observed_at").values("last_seen_at")[:1])
    return (UnregisteredAgent.objects.filter(registered=False, events__gt=0)
            .annotate(heard=Subquery(heard)).values_list("name", "heard", "last_seen"))
