"""The fleet view as a snapshot. Judging every agent against every guardrail and toxic
combination takes tens of seconds at 100,000 agents, so the workers do it in the background (as AWS
Config's aggregator and Gatekeeper's audit do) and the fleet and toxic pages and APIs read the
stored result, with the time it is "as of": a constant number of queries per request.

A change the view reads (an approval, a guardrail or toxic combination saved, a finding opened
or closed, a toxic-path check) queues a refresh FLEET_SNAPSHOT_DELAY_SECONDS later; refreshes
asked for meanwhile collapse into that one. The queued key is cleared when the refresh starts,
so a change seen after the start queues another. The periodic resync queues one too once the
snapshot is older than FLEET_SNAPSHOT_BACKSTOP_SECONDS, as a backstop. With no snapshot yet
(a fresh install) the first reader computes it inline.

The snapshot is derived data, like /metrics: it writes no audit row (the changes it reflects
wrote theirs)."""

import logging
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from config import queues
from reconciliation.fleet import Fleet, view_of
from reconciliation.models import FleetSnapshot

QUEUED_KEY = "fleet:snapshot:queued"
RUNNING_KEY = "fleet:snapshot:running"
QUEUED_TTL = 300  # a lost refresh job stops collapsing new requests after this long
JOB_TIMEOUT = 900
MAX_PATHS = 50  # toxic paths listed per kind; the counts are always whole
log = logging.getLogger(__name__)


def compute(now: datetime | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fleet view and the fleet's toxic paths (approved and observed), from one load."""
    fleet = Fleet.load(now)
    view = view_of(fleet)
    toxic = {"approved": [p.to_dict() for p in fleet.approved_paths[:MAX_PATHS]],
             "approved_count": len(fleet.approved_paths),
             "observed": [p.to_dict() for p in fleet.observed_paths[:MAX_PATHS]],
             "observed_count": len(fleet.observed_paths)}
    return view, toxic


def record_fleet_snapshot(now: datetime | None = None) -> FleetSnapshot:
    """Compute the snapshot and store it, unless a snapshot of a later moment is stored
    already (two refreshes that overlap: the later reading wins)."""
    as_of = now or timezone.now()
    started = time.monotonic()
    view, toxic = compute(as_of)
    fields = {"as_of": as_of, "fleet": view, "toxic_paths": toxic,
              "took_ms": round((time.monotonic() - started) * 1000)}
    if not FleetSnapshot.objects.filter(pk=1, as_of__lte=as_of).update(**fields):
        try:
            with transaction.atomic():
                return FleetSnapshot.objects.create(pk=1, **fields)
        except IntegrityError:  # a later one is there
            pass
    return FleetSnapshot.objects.get(pk=1)


def current() -> FleetSnapshot:
    """The stored snapshot (one query); with none yet, computed now."""
    return FleetSnapshot.objects.filter(pk=1).first() or record_fleet_snapshot()


def refreshing() -> bool:
    """Whether a refresh is queued or running (one Redis call; not knowing is not refreshing)."""
    try:
        return bool(queues.queue("default").connection.exists(QUEUED_KEY, RUNNING_KEY))
    except Exception as error:  # noqa: BLE001 - the page still shows what it has
        log.warning("could not tell whether the fleet snapshot is refreshing: %s", error)
        return False


def freshness(snapshot: FleetSnapshot) -> dict[str, Any]:
    """How old the snapshot is, as the pages and APIs say it."""
    age = max(0, round((timezone.now() - snapshot.as_of).total_seconds()))
    return {"as_of": snapshot.as_of.isoformat().replace("+00:00", "Z"), "age_seconds": age,
            "refreshing": refreshing()}


def refresh_started() -> None:
    """The refresh job begins: from now on a change queues another one."""
    connection = queues.queue("default").connection
    with connection.pipeline() as pipe:
        pipe.delete(QUEUED_KEY)
        pipe.set(RUNNING_KEY, "1", ex=JOB_TIMEOUT)
        pipe.execute()


def refresh_ended() -> None:
    queues.queue("default").connection.delete(RUNNING_KEY)


def enqueue_refresh() -> bool:
    """Queue a refresh FLEET_SNAPSHOT_DELAY_SECONDS from now, unless one is queued already."""
    queue = queues.queue("default")
    if not queue.connection.set(QUEUED_KEY, "1", nx=True, ex=QUEUED_TTL):
        return False
    job = "reconciliation.jobs.refresh_fleet_snapshot"
    delay = settings.FLEET_SNAPSHOT_DELAY_SECONDS
    if delay:
        queue.enqueue_in(timedelta(seconds=delay), job, job_timeout=JOB_TIMEOUT)
    else:
        queue.enqueue(job, job_timeout=JOB_TIMEOUT)
    return True


def backstop(now: datetime | None = None) -> bool:
    """From the periodic resync: queue a refresh if the snapshot is older than
    FLEET_SNAPSHOT_BACKSTOP_SECONDS (a change no trigger announced still shows up)."""
    since = (now or timezone.now()) - timedelta(seconds=settings.FLEET_SNAPSHOT_BACKSTOP_SECONDS)
    if FleetSnapshot.objects.filter(as_of__gte=since).exists():
        return False
    return enqueue_refresh()


def request_refresh() -> None:
    """After commit, a refresh of the fleet snapshot (collapsed with any already waiting)."""
    transaction.on_commit(enqueue_refresh, robust=True)
