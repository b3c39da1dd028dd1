"""The reconcile job: one pass per agent at a time, requeued on failure or contention.

One pass per agent at a time: a Redis lock with an expiry (its keys and scripts live in
`work_queue`), so a dead worker's lock lapses and another worker finishes the work. Failures
requeue with exponential backoff and jitter, like the controller-runtime work queue.
"""

import logging
import random
import uuid
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from redis.exceptions import RedisError

from audit.context import request_id_scope
from config.scheduled_time import not_before
from reconciliation.choices import Trigger
from reconciliation.connectors import ConnectorError
from reconciliation.controller import work_queue
from reconciliation.controller.backoff import backoff_seconds
from reconciliation.reconciler import passes

# Passes a holder runs back to back for triggers that arrived during its own, at most.
FOLLOW_UPS = 3
# The name passes are queued under (triggers.py too): workers of the previous release read it.
PASS_JOB = "reconciliation.jobs.reconcile_agent"
log = logging.getLogger(__name__)


def _queue():
    return work_queue.queue()


def reconcile_agent(agent_id: int, trigger: str, attempt: int = 0, queued: str = "") -> str:
    """Run one pass for an agent, holding its lock; requeue on failure or contention.

    `queued` is the token of the waiting-pass key this job owns (see `enqueue_reconcile`):
    while the lock is busy the key stays set, so further triggers collapse into this job."""
    queue = _queue()
    connection = queue.connection
    if queued and work_queue.was_taken(connection, queued):
        return "collapsed"  # the lock's holder ran this pass right after its own
    token = uuid.uuid4().hex
    if not work_queue.acquire_lock(connection, agent_id, token, settings.RECONCILE_LOCK_SECONDS):
        # Another worker is reconciling this agent: come back once it is likely done.
        if queued:
            work_queue.keep_waiting(connection, agent_id)
        queue.enqueue_in(timedelta(seconds=1 + random.random()), PASS_JOB, agent_id,
                         trigger, attempt, queued=queued)
        return "busy"
    if queued:  # from here on a new trigger must queue a new pass: this one reads state now
        work_queue.release_waiting(connection, agent_id, trigger, queued)
    if trigger == Trigger.VERIFY:  # likewise: this pass may need to schedule the next one
        work_queue.clear_verify(connection, agent_id)
    try:
        if queued and work_queue.was_taken(connection, queued):
            return "collapsed"  # taken over between the check above and the lock
        with request_id_scope(f"reconcile-{agent_id}-{token[:8]}"), work_queue.held_lock(
                connection, agent_id, token, settings.RECONCILE_LOCK_SECONDS):
            result = passes.reconcile(agent_id, trigger=trigger,
                                      still_held=work_queue.ensure_still_held)
            for _ in range(FOLLOW_UPS):
                waiting = work_queue.take_waiting(connection, agent_id)
                if waiting is None:
                    break
                result = passes.reconcile(agent_id, trigger=waiting,
                                          still_held=work_queue.ensure_still_held)
            requeue(agent_id, result)
        return result.run.result if result.run else "skipped"
    except work_queue.LockLost as lost:
        # Another worker holds the agent now; its pass decides afresh and finishes the work
        # (each change is idempotent by its key). Nothing to retry here.
        log.error("reconcile of agent %s stopped before its next change: %s", agent_id, lost)
        return "lock lost"
    except ConnectorError as error:  # the platform failed: expected, retried quietly
        delay = retry(queue, agent_id, attempt, error)
        return "failed" if delay is None else f"retry in {delay:.1f}s"
    except Exception as error:
        # Anything else (a database lock timeout, a deadlock, a bug) is retried too, as
        # controller-runtime requeues every error: an observation stored by a pass that then
        # failed would otherwise wait for the periodic resync, since the agent's next
        # heartbeat changes nothing and asks for no pass. Raised again so RQ keeps the job
        # among its failed ones, with its traceback.
        retry(queue, agent_id, attempt, error)
        raise
    finally:
        work_queue.release_lock(connection, agent_id, token)


def retry(queue, agent_id: int, attempt: int, error: Exception) -> float | None:
    """Queue the failed pass again after a backoff; None once the retries are spent (the
    periodic resync still comes). Returns the delay in seconds."""
    if attempt >= settings.RECONCILE_MAX_RETRIES:
        log.error("reconcile of agent %s gave up after %s attempts: %s", agent_id,
                  attempt + 1, error)
        return None
    delay = backoff_seconds(attempt + 1)
    try:
        queue.enqueue_in(timedelta(seconds=delay), PASS_JOB, agent_id, Trigger.RETRY,
                         attempt + 1)
    except RedisError:  # Redis is away too: the periodic resync re-derives the pass
        log.warning("could not queue the retry of agent %s", agent_id, exc_info=True)
        return None
    return delay


def requeue(agent_id: int, result: passes.Result) -> None:
    """The pass asked to run again after `requeue_after` (a correction to verify, a grant's
    end, a waiver's lapse, a shadow's or a maintenance window's end): at most one such pass
    waits per agent, the soonest. This is the only timed pass: a change asks for a pass now
    (triggers.py), and that pass says when the next one is due."""
    if result.requeue_after is None or result.run is None:
        return
    try:
        if result.requeue_trigger == Trigger.VERIFY:
            schedule_verify(agent_id)
            return
        when = result.run.started_at + result.requeue_after
        queue = _queue()
        if work_queue.claim_requeue(queue.connection, agent_id, when.timestamp(),
                                    timezone.now().timestamp()):
            queue.enqueue_at(not_before(when), PASS_JOB, agent_id, result.requeue_trigger)
    except RedisError:  # the pass stands; the periodic resync re-derives the next one
        log.warning("could not requeue agent %s", agent_id, exc_info=True)


def schedule_verify(agent_id: int) -> None:
    """A verification pass a few seconds from now (at most one waiting per agent)."""
    queue = _queue()
    delay = settings.RECONCILE_VERIFY_DELAY_SECONDS
    if work_queue.claim_verify(queue.connection, agent_id, delay + work_queue.QUEUED_TTL):
        queue.enqueue_at(not_before(timezone.now() + timedelta(seconds=delay)), PASS_JOB,
                         agent_id, Trigger.VERIFY)
