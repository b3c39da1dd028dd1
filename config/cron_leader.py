"""The cron scheduler as a leader: any number of cron processes may run, one enqueues.

RQ's cron scheduler has no lock: two `rqcron` processes (two hosts for availability, or a
second one started by mistake) each enqueue every periodic job. Here each process competes for
one Redis key, `cron:leader`, set with an expiry and renewed by its holder on every loop; the
others wait and take over within `CRON_LEADER_SECONDS` of the leader dying or losing Redis.
A process that finds the key held by someone else, or fails to renew it, enqueues nothing.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django_rq.cron import DjangoCronScheduler
from redis import RedisError
from rq.cron import CronJob, CronScheduler
from rq.exceptions import StopRequested

LEADER_KEY = "cron:leader"
log = logging.getLogger(__name__)

# Renews only our own lease, or takes a free one; answers 1 when we hold it after the call.
_LEAD = """
local holder = redis.call('get', KEYS[1])
if holder == ARGV[1] or not holder then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
_RESIGN = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class LeaderCronScheduler(DjangoCronScheduler):
    """A cron scheduler that enqueues only while it holds the leader lease."""

    def __init__(self, *args, lease_seconds: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lease_seconds = lease_seconds or settings.CRON_LEADER_SECONDS
        self.leading = False
        self.stop_requested = False

    def _request_stop(self, signum, frame) -> None:
        # RQ raises StopRequested from the signal handler, wherever the loop is. Landing in a
        # log write (the cron logs every job it enqueues), logging's handleError swallowed it
        # ("--- Logging error ---" and a traceback in the log) and the loop ran on until it
        # was killed. Raised here only when the signal lands in the loop's own frame (its
        # sleep); anywhere else the flag stops the loop at its next step.
        self.stop_requested = True
        self.log.info("CronScheduler %s: received shutdown signal %s", self.name, signum)
        if frame is not None and frame.f_code is CronScheduler.start.__code__:
            raise StopRequested()

    def _stop_if_requested(self) -> None:
        if self.stop_requested:
            raise StopRequested()

    def lead(self) -> bool:
        """Take or renew the lease; False (and enqueue nothing) when Redis cannot say."""
        try:
            held = self.connection.eval(_LEAD, 1, LEADER_KEY, self.name,
                                        int(self.lease_seconds * 1000))
        except RedisError:
            log.warning("cron %s: Redis unreachable, not leading", self.name)
            held = 0
        # A new leader runs whatever is due at once: every periodic job is idempotent.
        if bool(held) != self.leading:
            log.info("cron %s: %s", self.name, "now leading" if held else "no longer leading")
        self.leading = bool(held)
        return self.leading

    def enqueue_jobs(self) -> list[CronJob]:
        self._stop_if_requested()
        return super().enqueue_jobs() if self.lead() else []

    def calculate_sleep_interval(self) -> float:
        self._stop_if_requested()  # before a sleep of up to a minute
        # Wake often enough to renew the lease (leader) or to notice it free (follower).
        renew = self.lease_seconds / 3
        return renew if not self.leading else min(super().calculate_sleep_interval(), renew)

    def register_death(self, *args, **kwargs) -> None:
        try:
            self.connection.eval(_RESIGN, 1, LEADER_KEY, self.name)  # hand over at once
        except RedisError:
            pass
        super().register_death(*args, **kwargs)
