"""Placing queued entries in the log. With AUDIT_SEQUENCER=writers (the default) a writer that
found the placing lock taken queues its entry, and after its commit the lock's holder places the
queue if the lock is free (audit.actions.settle), never waiting. Whatever is left, and
everything with AUDIT_SEQUENCER=workers (writers only queue), is placed by the sequencer job on
the RQ workers in batches, as Trillian does; one job at a time.

With `workers`, a committed entry kicks the sequencer: it wakes the running job if there is one (a
Redis list the job waits on), else queues one (a Redis flag says one is due). The job places what
is queued, then waits briefly for the next kick, so a steady stream of commits is placed batch
after batch by one warm job instead of one queued job per burst; what arrives while a batch runs is
the next batch. After RUN_SECONDS it hands the worker back (queueing a successor if entries
remain), so the other queues on the same worker keep moving. rqcron also runs the job every
AUDIT_SEQUENCE_DELAY_SECONDS: after a worker is killed mid-batch (its transaction rolled back, the
flag left set) the entries wait at most that long.
"""

import logging
import time
from collections.abc import Callable
from typing import Any

from django.dispatch import Signal
from redis.exceptions import RedisError

from audit.models import AuditPendingEntry
from config import queues

log = logging.getLogger(__name__)
# Sent inside the transaction that gave entries their seqs and hashes (`last_seq`: the newest);
# a receiver that acts on them does so on commit (the SIEM stream, siem/receivers.py).
placed = Signal()
FLAG = "audit:sequencer:due"
WAKE = "audit:sequencer:wake"
FLAG_SECONDS = 30  # a job killed before clearing the flag blocks kicks no longer than this
LINGER_SECONDS = 0.5  # how long a job waits for the next commit before it ends
RUN_SECONDS = 5.0  # then it leaves the worker to other jobs


def _queue() -> Any:
    """The default queue, kept with its connection pool: a kick is then one round trip."""
    return queues.queue("default")


def _enqueue(queue: Any) -> None:
    queue.enqueue("audit.jobs.sequence", kwargs={"linger": LINGER_SECONDS}, job_timeout=600)


def kick() -> None:
    """Wake the sequencer, or queue one if none is due (called after a writer commits)."""
    try:
        queue = _queue()
        pipe = queue.connection.pipeline(transaction=False)
        pipe.rpush(WAKE, 1)
        pipe.ltrim(WAKE, -1, -1)  # one wake-up is enough, however many commits ask
        pipe.set(FLAG, "1", nx=True, ex=FLAG_SECONDS)
        if pipe.execute()[2]:
            _enqueue(queue)
    except RedisError as error:  # the periodic run still picks the entries up
        log.warning("could not queue the audit sequencer: %s", error)


def drain(place: Callable[[], int], linger: float = 0.0) -> int:
    """Sequence every queued entry, batch after batch (`place`: audit.actions.sequence_pending,
    which places one and says how many), waiting up to `linger` seconds for more after each;
    how many were placed."""
    placed, until = 0, time.monotonic() + RUN_SECONDS
    connection = _queue().connection
    while True:
        while batch := place():
            placed += batch
            connection.expire(FLAG, FLAG_SECONDS)  # still running: no second job is due
        if linger and time.monotonic() < until and connection.blpop([WAKE], timeout=linger):
            continue
        connection.delete(FLAG)
        if not AuditPendingEntry.objects.exists():
            return placed
        if not connection.set(FLAG, "1", nx=True, ex=FLAG_SECONDS):
            return placed  # another run is due and will take them
        if time.monotonic() >= until:
            _enqueue(_queue())  # behind whatever else waits for this worker
            return placed
