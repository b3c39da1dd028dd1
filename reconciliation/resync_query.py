"""The resync's one set-based query: which agents need a full pass.

An agent is skipped only while everything its last pass judged still holds: it is not
restricted for an overdue review, it converged at this generation with no open findings, on
this desired version and suspension, before the next moment its pass said it must run again
(`in_sync_until`: a grant's end, a waiver's lapse, a shadow's end), and the platform still
reports the state with the digest that pass found in sync. A waiver or a shadow whose end has
come and no pass has seen (the pass its change asked for was lost with Redis) needs one too.
So a timed pass that was lost (Redis down at the requeue, the scheduled job deleted) is run by
the first resync after its time. For converged agents the database compares integers and
digests; no row reaches Python and nothing is written."""

from datetime import datetime

from django.conf import settings
from django.db.models import (
    BooleanField,
    Case,
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)

from reconciliation.models import ObservedState
from registry.choices import Lifecycle, WaiverState
from registry.models import Agent, Waiver


def reconcilable() -> QuerySet[Agent]:
    """Agents a pass applies to: an approved version and not retired."""
    return Agent.objects.filter(active_version__isnull=False).exclude(
        lifecycle=Lifecycle.RETIRED)


def _in_sync(now: datetime) -> Q:
    latest_observed = (ObservedState.objects.filter(agent=OuterRef("pk"))
                       .order_by("-observed_at").values("state_sha256")[:1])
    suspended = Q(lifecycle=Lifecycle.SUSPENDED)
    pushed = (Q(connector__type="push") | Q(connector__type__isnull=True)) & Q(
        status__in_sync_observed_sha256=Subquery(latest_observed))
    # A lagging sandbox read returns its stale copy: left to a full pass (a fault injection).
    sandboxed = Q(connector__type="sandbox", sandbox__state_sha256=F(
        "status__in_sync_observed_sha256")) & (Q(sandbox__stale_until__isnull=True) | Q(
            sandbox__stale_until__lte=now))
    # A permission source cannot be read in bulk either: its agents always get a pass.
    bound = {name for source in settings.PERMISSION_SOURCES.values() for name in source.agents}
    lapsed_unseen = Exists(Waiver.objects.filter(
        agent=OuterRef("pk"), state=WaiverState.ACTIVE, lapsed_at__isnull=True,
        expires_at__lte=now))
    return (
        ~Q(name__in=bound)
        # an overdue agent restricted to safe tools is rare and judged by a full pass
        & Q(restricted_to__isnull=True, status__converged=True, status__open_findings=0,
          status__converged_generation=F("generation"),
          status__in_sync_version=F("active_version_id"))
        & ~Q(status__in_sync_observed_sha256="")
        & ((suspended & Q(status__in_sync_suspended=True))
           | (~suspended & Q(status__in_sync_suspended=False)))
        & (Q(status__in_sync_until__isnull=True) | Q(status__in_sync_until__gt=now))
        # ended with no pass to see it: the shadow is ended and the lapse recorded by a pass
        & (Q(status__shadow=False) | Q(status__shadow_until__isnull=True)
           | Q(status__shadow_until__gt=now))
        & ~lapsed_unseen
        & (sandboxed | pushed))


def needing_pass(agents: QuerySet[Agent], now: datetime) -> list[int]:
    """Ids (ascending) of the agents in `agents` that need a full pass, in one query. The http
    connector and the permission sources cannot be read in bulk, so their agents always get a
    pass."""
    verdict = Case(When(_in_sync(now), then=Value(True)), default=Value(False),
                   output_field=BooleanField())
    return list(agents.annotate(in_sync=verdict).filter(in_sync=False).order_by("pk")
                .values_list("pk", flat=True))
