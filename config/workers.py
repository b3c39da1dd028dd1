"""The RQ worker the control plane runs (`manage.py rqworker`, through RQ["WORKER_CLASS"])."""

from rq import Worker as RQWorker

# How often a worker looks after the queues (RQ's "maintenance"): cleans the registries and,
# when no scheduler runs here, tries to take the scheduler lock. RQ's 10 minutes (and an idle
# worker blocking 405 s between looks) meant that a worker holding the scheduler lock, cut off
# or killed, left every scheduled job (a pass requeued behind a busy lock, verification passes,
# retries, grant expiries) unrun for up to 10 minutes after its lock lapsed.
MAINTENANCE_SECONDS = 30


class Worker(RQWorker):
    """RQ's worker, taking over the scheduler within MAINTENANCE_SECONDS of its lock lapsing."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("maintenance_interval", MAINTENANCE_SECONDS)
        super().__init__(*args, **kwargs)

    @property
    def dequeue_timeout(self) -> int:
        # An idle worker checks for maintenance between blocking reads: keep them short.
        return min(super().dequeue_timeout, MAINTENANCE_SECONDS)

    @property
    def connection_timeout(self) -> int:
        # RQ derives its sockets' read timeout from the blocking read's; kept at RQ's own
        # (worker_ttl - 5 s), so a worker waits out a network partition of minutes, as it did,
        # rather than quitting after 40 s.
        return max(1, self.worker_ttl - 15) + 10
