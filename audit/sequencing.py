"""Running the sequencer on the RQ workers (AUDIT_SEQUENCER=workers), as Trillian does: writers
only queue entries; one job at a time places them in batches.

A committed entry kicks the job unless one is already due (a Redis flag); the job drains the
queue, clears the flag and looks once more, so an entry committed meanwhile is never stranded.
rqcron also runs the job every AUDIT_SEQUENCE_DELAY_SECONDS: after a worker is killed mid-batch
(its transaction rolled back, the flag left set) the entries wait at most that long.
"""

import logging
from functools import cache
from typing import Any

import django_rq
from redis.exceptions import RedisError

log = logging.getLogger(__name__)
FLAG = "audit:sequencer:due"
FLAG_SECONDS = 30  # a job killed before clearing the flag blocks kicks no longer than this


@cache
def _queue() -> Any:
    """One queue (and Redis connection pool) per process: a kick is then one round trip."""
    return django_rq.get_queue("default", commit_mode="auto")


def kick() -> None:
    """Make sure a sequencer job is queued (called after a writer commits)."""
    try:
        queue = _queue()
        if queue.connection.set(FLAG, "1", nx=True, ex=FLAG_SECONDS):
            queue.enqueue("audit.jobs.sequence", job_timeout=600)
    except RedisError as error:  # the periodic run still picks the entries up
        log.warning("could not queue the audit sequencer: %s", error)


def drain() -> int:
    """Sequence every queued entry, batch after batch; how many were placed."""
    from audit.actions import sequence_pending
    from audit.models import AuditPendingEntry

    placed = 0
    connection = django_rq.get_connection("default")
    while True:
        while batch := sequence_pending():
            placed += batch
        connection.delete(FLAG)
        if not AuditPendingEntry.objects.exists():
            return placed
        if not connection.set(FLAG, "1", nx=True, ex=FLAG_SECONDS):
            return placed  # another run is due and will take them
