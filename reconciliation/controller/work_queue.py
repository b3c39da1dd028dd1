"""The reconcile work queue's Redis protocol, owned here and nowhere else.

Per agent, three keys, as in controller-runtime's work queue:
- `reconcile:queued:{id}` names the one waiting pass ("<trigger> <token>"); triggers arriving
  while it is set collapse into that pass. Only the job holding the token clears it, once it
  holds the lock.
- `reconcile:lock:{id}` is held by the worker running a pass, with an expiry so a dead
  worker's lock lapses; a renewal thread keeps it while a slow platform answers.
- `reconcile:verify:{id}` marks the one waiting verification pass.
- `reconcile:requeue:{id}` holds when the one pass a pass asked for (a grant's end, a
  waiver's lapse) is due, so repeated passes do not queue it again.
- `reconcile:taken:{token}` says the lock's holder ran the waiting pass `token` right after
  its own (a trigger that arrived during a pass), so that pass's job, when it runs, is done.

redis-py's own `Lock` covers the lock but not the token-named waiting key, and its token is
thread-local by default (the renewal thread would not see it): two short scripts here keep
one protocol in one place.
"""

import logging
import threading
from contextvars import ContextVar

from rq import Queue

from config import queues

QUEUE_NAME = "reconcile"
QUEUED_KEY = "reconcile:queued:{agent_id}"
QUEUED_TTL = 600  # a lost job cannot block an agent's triggers for longer than this
LOCK_KEY = "reconcile:lock:{agent_id}"
VERIFY_KEY = "reconcile:verify:{agent_id}"
REQUEUE_KEY = "reconcile:requeue:{agent_id}"
TAKEN_KEY = "reconcile:taken:{token}"
log = logging.getLogger(__name__)
# The lock the running pass holds (set by `held_lock`), for `ensure_still_held`.
_HELD: ContextVar["LockRenewal | None"] = ContextVar("reconcile_lock_held", default=None)


class LockLost(Exception):
    """The pass's lock expired or another worker took it: the pass must make no more changes
    (the holder's pass decides afresh and finishes the work)."""

# Deletes the key only if it still holds our token (it may have expired and moved on).
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end
"""
# Takes over the waiting pass (queued key "<trigger> <token>"): clears the key and marks the
# token taken, so the waiting job, when it runs, knows its pass was done.
_TAKE = """
local value = redis.call('get', KEYS[1])
if not value then return false end
redis.call('del', KEYS[1])
redis.call('set', ARGV[1] .. string.match(value, '(%S+)$'), '1', 'EX', ARGV[2])
return value
"""
# Claims the agent's requeue at ARGV[1] unless one is already due sooner (and not yet past).
_REQUEUE = """
local at = redis.call('get', KEYS[1])
if at and tonumber(at) <= tonumber(ARGV[1]) and tonumber(at) > tonumber(ARGV[2]) then return 0 end
redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[3])
return 1
"""
# Extends the key only while it still holds our token.
_EXTEND = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2])
else return 0 end
"""


def queue() -> Queue:
    """The queue that holds reconcile passes only (one waiting per agent)."""
    return queues.queue(QUEUE_NAME)


def claim_waiting(connection, agent_id: int, trigger: str, token: str) -> bool:
    """Name the agent's one waiting pass; False when a pass is already waiting."""
    return bool(connection.set(QUEUED_KEY.format(agent_id=agent_id), f"{trigger} {token}",
                               nx=True, ex=QUEUED_TTL))


def keep_waiting(connection, agent_id: int) -> None:
    """The waiting pass found the lock busy and comes back later: it keeps its place."""
    connection.expire(QUEUED_KEY.format(agent_id=agent_id), QUEUED_TTL)


def release_waiting(connection, agent_id: int, trigger: str, token: str) -> None:
    """The waiting pass has started: from here on a new trigger queues a new pass."""
    connection.eval(_RELEASE, 1, QUEUED_KEY.format(agent_id=agent_id), f"{trigger} {token}")


def take_waiting(connection, agent_id: int) -> str | None:
    """The trigger of a pass queued while ours ran, now ours to run (the lock is still held):
    the state changed during our pass, and its job would otherwise wait for the lock to free
    and for the scheduler to bring it back (1-3 s). None when nothing is waiting."""
    value = connection.eval(_TAKE, 1, QUEUED_KEY.format(agent_id=agent_id),
                            TAKEN_KEY.format(token=""), QUEUED_TTL)
    return None if value is None else value.decode().rsplit(" ", 1)[0]


def was_taken(connection, token: str) -> bool:
    """Whether the lock's holder already ran the waiting pass named `token`."""
    return bool(connection.exists(TAKEN_KEY.format(token=token)))


def acquire_lock(connection, agent_id: int, token: str, seconds: int) -> bool:
    """Take the agent's pass lock for `seconds`; False when another worker holds it."""
    return bool(connection.set(LOCK_KEY.format(agent_id=agent_id), token, nx=True,
                               ex=seconds))


def release_lock(connection, agent_id: int, token: str) -> None:
    """Free the agent's pass lock if it is still ours."""
    connection.eval(_RELEASE, 1, LOCK_KEY.format(agent_id=agent_id), token)


def held_lock(connection, agent_id: int, token: str, seconds: int) -> "LockRenewal":
    """The renewal that keeps the agent's pass lock alive while a pass runs."""
    return LockRenewal(connection, LOCK_KEY.format(agent_id=agent_id), token, seconds)


def claim_verify(connection, agent_id: int, seconds: int) -> bool:
    """Mark the agent's one waiting verification pass; False when one is already waiting.
    The verify pass clears it when it starts; the expiry only frees an agent whose verify job
    was lost."""
    return bool(connection.set(VERIFY_KEY.format(agent_id=agent_id), "1", nx=True,
                               ex=seconds))


def claim_requeue(connection, agent_id: int, when: float, now: float) -> bool:
    """Mark the agent's requeued pass due at `when` (epoch seconds); False when one is already
    due no later (and not yet past), so it is not queued twice."""
    seconds = int(max(0.0, when - now)) + QUEUED_TTL
    return bool(connection.eval(_REQUEUE, 1, REQUEUE_KEY.format(agent_id=agent_id),
                                repr(when), repr(now), seconds))


def clear_verify(connection, agent_id: int) -> None:
    """The verification pass has started: it may need to schedule the next one."""
    connection.delete(VERIFY_KEY.format(agent_id=agent_id))


def ensure_still_held() -> None:
    """Before a pass changes anything on a platform: raise LockLost unless its lock still
    holds its token. Asked of Redis each time (the renewal thread notices a loss only a third
    of the lock's lifetime later); a pass run outside a job (tests, commands) holds no lock."""
    renewal = _HELD.get()
    if renewal is not None:
        renewal.check()


class LockRenewal:
    """Keeps a held lock alive while a pass runs (a slow platform can take longer than the
    lock's expiry): a daemon thread extends it every third of its lifetime, only while it
    still holds our token. A dead worker's thread dies with it, so its lock still lapses."""

    def __init__(self, connection, key: str, token: str, seconds: int) -> None:
        self.connection, self.key, self.token, self.seconds = connection, key, token, seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"lock-renewal {key}")
        self.lost = False

    def _run(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                held = self.connection.eval(_EXTEND, 1, self.key, self.token,
                                            int(self.seconds * 1000))
            except Exception:  # noqa: BLE001 - Redis blinked: try again next tick
                log.warning("could not extend %s", self.key, exc_info=True)
                continue
            if not held:
                self.lost = True
                log.error("lost %s while a pass was running", self.key)
                return

    def check(self) -> None:
        """Raise LockLost unless the lock still holds our token."""
        held = self.connection.get(self.key)
        if self.lost or held is None or held.decode() != self.token:
            self.lost = True
            raise LockLost(f"{self.key} is no longer held by this pass")

    def __enter__(self) -> "LockRenewal":
        self._thread.start()
        self._reset = _HELD.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _HELD.reset(self._reset)
        self._stop.set()
        self._thread.join()
