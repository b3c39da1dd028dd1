"""Sliding windows in Redis: each event is a member of a sorted set scored by its time, so a
retried event (same id) is counted once, and counting a window is one ZCOUNT. A batch's
windows are counted by one script (one round trip, one command on the wire whatever the
batch holds)."""

import json
import math
import random
import time
import uuid
from collections.abc import Iterable
from datetime import datetime

import django_rq
import msgspec
from redis import Redis, RedisError
from redis.client import Pipeline
from redis.commands.core import Script
from rq import Queue

from config import redis_connection
from runtime.behaviour import WindowCheck

FILLED_KEY = "bw:filled:{agent_id}"

# ARGV: now, then as JSON the windows' keys, each window's seconds (in the keys' order) and
# the flat list of a triple per event and window (window index, member, score), so the batch
# is four arguments, not thousands to encode (redis-py packs each argument in Python: the
# keys alone were a twentieth of a 1,000-agent batch's CPU). The keys are not declared in
# KEYS for that reason: the windows' Redis is one instance, never a cluster
# (docs/operating.md). Every member goes in first, each window is trimmed to its last
# `seconds` and given an expiry, then each triple's window is counted over the `seconds` up
# to its score. Returns those counts, in order, as one comma-separated string (one reply to
# read, not one per event). A count reads only its own span, so trimming a window's expired
# members only keeps its memory in bounds: each window is trimmed on about one use in
# ARGV[5] (the windows whose place in the batch plus ARGV[6], a random seed, divides by it),
# not on every use (a trim per window was a quarter of the script's calls). ARGV[7], when
# not '', is the epoch this process last saw (the key ARGV[8]): if Redis holds another (it
# lost its windows since), or the server is not the run the epoch was set on (the key
# ARGV[9]: it restarted, perhaps from an older snapshot, or another server took over),
# nothing is added and the reply is '!' (to_refill may then have left the epoch to this
# check).
COUNT = """
if ARGV[7] ~= '' and (redis.call('GET', ARGV[8]) ~= ARGV[7] or redis.call('GET', ARGV[9]) ~=
    string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')) then return '!' end
local now = tonumber(ARGV[1])
local keys, seconds = cjson.decode(ARGV[2]), cjson.decode(ARGV[3])
local triples = cjson.decode(ARGV[4])
local every, seed = tonumber(ARGV[5]), tonumber(ARGV[6])
for i = 1, #triples, 3 do
  redis.call('ZADD', keys[triples[i]], triples[i + 2], triples[i + 1])
end
for k = 1, #keys do
  if (k + seed) % every == 0 then
    redis.call('ZREMRANGEBYSCORE', keys[k], '-inf', now - seconds[k])
  end
  redis.call('EXPIRE', keys[k], seconds[k] + 60)
end
local counts = {}
for i = 1, #triples, 3 do
  local k, score = triples[i], triples[i + 2]
  counts[#counts + 1] = redis.call('ZCOUNT', keys[k], score - seconds[k], score)
end
return table.concat(counts, ',')
"""


def connection() -> Redis:
    """The ingest queue's Redis, one client (and connection pool) per process and address:
    django_rq's get_connection builds a new client, and a new connection, on every call."""
    return redis_connection.client()


def ingest_queue() -> Queue:
    """The ingest workers' queue on that client (django_rq's get_queue alone would make a
    client, and a connection, for every call)."""
    return django_rq.get_queue(  # noqa: TID251 (on the windows' own kept client)
        "ingest", commit_mode="auto", connection=connection())


def add_counts(pipe: Pipeline, checks: list[tuple[WindowCheck, str, datetime]],
               now: datetime) -> None:
    """Queue the batch's window script on the pipeline (read its reply with `counts`)."""
    _count_script()(**_count_call(checks, now), client=pipe)


def _count_call(checks: list[tuple[WindowCheck, str, datetime]], now: datetime
                ) -> dict[str, list]:
    """The window script's keys and arguments for the checks."""
    index: dict[str, int] = {}
    seconds: list[int] = []
    triples: list[str | int | float] = []
    for check, event_id, moment in checks:
        number = index.get(check.key)
        if number is None:
            number = index[check.key] = len(index) + 1
            seconds.append(check.seconds)
        triples += (number, event_id, moment.timestamp())
    # msgspec writes the JSON json.dumps would (UTF-8, shortest floats), in a fifth of the time.
    return {"keys": [], "args": [now.timestamp(), msgspec.json.encode(list(index)),
                                 msgspec.json.encode(seconds), msgspec.json.encode(triples),
                                 TRIM_EVERY, _trim_seed(), _known_epoch(), EPOCH_KEY,
                                 RUN_KEY]}


TRIM_EVERY = 8  # a window's expired members are trimmed on about one use in this many


def _trim_seed() -> int:
    """Which of a batch's windows are trimmed this time (random, so no window that a sender
    names in a fixed rhythm is always passed over)."""
    return random.randrange(TRIM_EVERY)


def _count_script() -> Script:
    return connection().register_script(COUNT)


def count(checks: Iterable[tuple[WindowCheck, str, datetime]], now: datetime) -> list[int]:
    """Add each (check, event id, time) to its window and return the window's count at that
    time, in order; expired members never count, and are trimmed on about one use of their
    window in TRIM_EVERY (one script, one round trip: not on a pipeline, which asks Redis
    whether it knows the script before every run)."""
    checks = list(checks)
    if not checks:
        return []
    return counts(_count_script()(**_count_call(checks, now)))


class EpochMoved(RedisError):
    """Redis lost its windows since this process last read its epoch: the window script added
    nothing. Every agent's windows must be filled again before they are counted."""


def counts(reply: bytes | str) -> list[int]:
    """The window script's reply as counts; raises EpochMoved (after forgetting every marker
    this process confirmed) when the script found Redis's epoch moved."""
    text = reply.decode() if isinstance(reply, bytes) else reply
    if text == "!":
        _forget("")
        raise EpochMoved("Redis lost the windows since this process last looked")
    return [int(n) for n in text.split(",")] if text else []


def _add(pipe: Pipeline, checks: list[tuple[WindowCheck, str, datetime]], now: datetime) -> None:
    """One ZADD, trim and expiry per window."""
    by_key: dict[str, tuple[WindowCheck, dict[str, float]]] = {}
    for check, event_id, moment in checks:
        by_key.setdefault(check.key, (check, {}))[1][event_id] = moment.timestamp()
    for key, (check, members) in by_key.items():
        pipe.zadd(key, members)
        pipe.zremrangebyscore(key, "-inf", now.timestamp() - check.seconds)
        pipe.expire(key, check.seconds + 60)


def fill(checks: Iterable[tuple[WindowCheck, str, datetime]], now: datetime) -> None:
    """Put stored events into their windows without counting (members are event ids, so an
    event already there is not counted twice)."""
    checks = list(checks)
    if checks:
        pipe = connection().pipeline(transaction=False)
        _add(pipe, checks, now)
        pipe.execute()


# A random value naming what the windows hold: it moves when Redis loses its data, and when
# the server is not the run it was set on (RUN_KEY: a restart, which may have loaded an older
# snapshot whose windows miss the events since, or a replica taking over, which may lag).
# Every fill marker (an agent's, a group rule's) holds the epoch it was set in, so a marker
# restored with an older snapshot vouches for nothing.
EPOCH_KEY = "bw:epoch"
RUN_KEY = "bw:epoch:run"  # the server run (INFO's run_id) the epoch was set on
CONFIRMED_SECONDS = 30  # a process trusts a fill marker it read or set this long
CONFIRMED_KEPT = 100_000
# (epoch, agent id, generation) -> when this process last read or set that agent's marker
_confirmed: dict[tuple[str, int, int], float] = {}

# The epoch (KEYS[1]) as of this server run (KEYS[2]): a new one (ARGV[1]) when Redis has
# none or the run is another; a Lua prelude of the scripts that read fill markers.
CURRENT_EPOCH = """
local function current_epoch(epoch_key, run_key, fresh)
  local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
  if redis.call('GET', run_key) ~= run then
    redis.call('SET', epoch_key, fresh)
    redis.call('SET', run_key, run)
    return fresh
  end
  redis.call('SET', epoch_key, fresh, 'NX')
  return redis.call('GET', epoch_key)
end
"""

# KEYS[1], KEYS[2]: the epoch and its run (CURRENT_EPOCH); KEYS[3..]: agents' fill markers;
# ARGV[2]: as JSON each marker's seconds. Each marker is read and kept for its seconds again
# (GETEX). Returns the epoch, then the markers' values, comma-separated ('' for none).
FILLED = CURRENT_EPOCH + """
local seconds, out = cjson.decode(ARGV[2]), {current_epoch(KEYS[1], KEYS[2], ARGV[1])}
for k = 3, #KEYS do
  out[k - 1] = redis.call('GETEX', KEYS[k], 'EX', seconds[k - 2]) or ''
end
return table.concat(out, ',')
"""


def to_refill(agents: list[tuple[int, int, int]], *, counting: bool = False) -> list[int]:
    """Of each (agent id, generation, seconds its longest window spans), the ids whose windows
    must be filled from the stored events: never filled, filled for another generation, or
    lost with Redis's data or its restart. Reading a marker keeps it for another `seconds`,
    so the windows of an agent whose events keep being counted are filled only after a new
    generation or a loss. A marker this process read or set in the last CONFIRMED_SECONDS is
    not read again (a batch naming a thousand agents read a thousand markers); Redis's epoch,
    read every time, says whether it lost its data or restarted since, and then every agent
    is refilled. One script, one round trip. `counting`: the caller counts next with the
    window script, which checks the epoch itself (EpochMoved); when no marker needs reading,
    nothing is read here (a round trip a batch). A caller that only peeks must not pass it."""
    if not agents:
        return []
    now = time.monotonic()
    epoch = _known_epoch()
    unsure = [a for a in agents if now - _confirmed.get((epoch, a[0], a[1]), -math.inf)
              >= CONFIRMED_SECONDS]
    if counting and epoch and not unsure:
        return []
    reply = connection().register_script(FILLED)(
        keys=[EPOCH_KEY, RUN_KEY, *(FILLED_KEY.format(agent_id=a) for a, _, _ in unsure)],
        args=[uuid.uuid4().hex, json.dumps([seconds + 60 for _, _, seconds in unsure])])
    current, *markers = (reply.decode() if isinstance(reply, bytes) else reply).split(",")
    matched = {agent_id for (agent_id, generation, _), marker in zip(unsure, markers, strict=True)
               if marker == _marker(current, generation)}
    if current != epoch:  # Redis lost its windows since this process last looked (or it
        _forget(current)  # never looked): only a marker just read vouches for an agent
        return [agent_id for agent_id, _, _ in agents if agent_id not in matched]
    for agent_id, generation, _ in unsure:
        if agent_id in matched:
            _confirmed[(epoch, agent_id, generation)] = now
    return [agent_id for agent_id, _, _ in unsure if agent_id not in matched]


_epoch: list[str] = [""]  # the epoch this process last saw


def _known_epoch() -> str:
    return _epoch[0]


def forget_confirmed() -> None:
    """Trust no fill marker or epoch this process saw (the next to_refill reads them all)."""
    _forget("")


def _forget(epoch: str) -> None:
    """Redis has a new epoch: nothing this process confirmed before holds."""
    _confirmed.clear()
    _epoch[0] = epoch


def mark_filled(marks: list[tuple[int, int, int]]) -> None:
    """Each (agent id, generation, seconds): the agent's windows hold its stored events for
    this generation (kept as long as its longest window past its last use, then filled again
    from what is stored). One pipeline."""
    pipe = connection().pipeline(transaction=False)
    for agent_id, generation, seconds in marks:
        pipe.set(FILLED_KEY.format(agent_id=agent_id), _marker(_known_epoch(), generation),
                 ex=seconds + 60)
    pipe.execute()
    now = time.monotonic()
    if len(_confirmed) + len(marks) > CONFIRMED_KEPT:
        _confirmed.clear()
    _confirmed.update(((_known_epoch(), agent_id, generation), now)
                      for agent_id, generation, _ in marks)


def _marker(epoch: str, generation: int) -> str:
    """An agent's fill marker: the generation its windows were filled for, in which epoch."""
    return f"{generation}@{epoch}"


def peek(check: WindowCheck, now: datetime) -> int:
    """How many members a window holds now (for a decision about an action not yet taken)."""
    return connection().zcount(check.key, now.timestamp() - check.seconds, now.timestamp())


# KEYS: the dedupe windows; ARGV[1]: JSON, a [candidate id, seconds] per key in KEYS order.
# Each key is set to its candidate unless it holds a window already; returns the ids they
# hold, as one JSON array (one command for the batch, not a SET and a GET per key).
WINDOW_IDS = """
local asked = cjson.decode(ARGV[1])
local ids = {}
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], asked[i][1], 'NX', 'EX', asked[i][2])
  ids[i] = redis.call('GET', KEYS[i])
end
return cjson.encode(ids)
"""


def window_ids(keys: list[tuple[str, str, int]]) -> list[str]:
    """For each (rule key, candidate id, seconds): the id of the dedupe window it falls in.
    The first violation of a rule opens a window named after it; later ones within `seconds`
    land in the same window, so they are one finding."""
    if not keys:
        return []
    reply = connection().register_script(WINDOW_IDS)(
        keys=[f"bw:dedupe:{rule_key}" for rule_key, _, _ in keys],
        args=[json.dumps([[candidate, int(seconds)] for _, candidate, seconds in keys],
                         ensure_ascii=False)])
    return json.loads(reply)
