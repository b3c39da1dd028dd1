"""Sliding windows in Redis: each event is a member of a sorted set scored by its time, so a
retried event (same id) is counted once, and counting a window is one ZCOUNT. A batch's
windows are counted by one script (one round trip, one command on the wire whatever the
batch holds)."""

import json
from collections.abc import Iterable
from datetime import datetime

from redis import Redis
from redis.client import Pipeline

from config import redis_connection
from runtime.behaviour import WindowCheck

FILLED_KEY = "bw:filled:{agent_id}"

# KEYS: the windows; ARGV: now, then as JSON each window's seconds (in KEYS order) and the
# flat list of a triple per event and window (window index, member, score), so the batch is
# three arguments, not thousands to encode. Every member goes in first, each window is
# trimmed to its last `seconds` and given an expiry, then each triple's window is counted
# over the `seconds` up to its score. Returns those counts, in order, as one comma-separated
# string (one reply to read, not one per event).
COUNT = """
local now = tonumber(ARGV[1])
local seconds, triples = cjson.decode(ARGV[2]), cjson.decode(ARGV[3])
for i = 1, #triples, 3 do
  redis.call('ZADD', KEYS[triples[i]], triples[i + 2], triples[i + 1])
end
for k = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', now - seconds[k])
  redis.call('EXPIRE', KEYS[k], seconds[k] + 60)
end
local counts = {}
for i = 1, #triples, 3 do
  local k, score = triples[i], triples[i + 2]
  counts[#counts + 1] = redis.call('ZCOUNT', KEYS[k], score - seconds[k], score)
end
return table.concat(counts, ',')
"""


def connection() -> Redis:
    """The ingest queue's Redis, one client (and connection pool) per process and address:
    django_rq's get_connection builds a new client, and a new connection, on every call."""
    return redis_connection.client()


def add_counts(pipe: Pipeline, checks: list[tuple[WindowCheck, str, datetime]],
               now: datetime) -> None:
    """Queue the batch's window script on the pipeline (read its reply with `counts`)."""
    index: dict[str, int] = {}
    seconds: list[int] = []
    triples: list[str | int | float] = []
    for check, event_id, moment in checks:
        if check.key not in index:
            index[check.key] = len(index) + 1
            seconds.append(check.seconds)
        triples += [index[check.key], event_id, moment.timestamp()]
    connection().register_script(COUNT)(
        keys=list(index), args=[now.timestamp(), json.dumps(seconds),
                                json.dumps(triples, ensure_ascii=False)], client=pipe)


def count(checks: Iterable[tuple[WindowCheck, str, datetime]], now: datetime) -> list[int]:
    """Add each (check, event id, time) to its window and return the window's count at that
    time, in order; expired members are trimmed as it goes (one script, one round trip)."""
    checks = list(checks)
    if not checks:
        return []
    pipe = connection().pipeline(transaction=False)
    add_counts(pipe, checks, now)
    return counts(pipe.execute()[0])


def counts(reply: bytes | str) -> list[int]:
    """The window script's reply as counts."""
    text = reply.decode() if isinstance(reply, bytes) else reply
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


# KEYS: agents' fill markers; ARGV[1]: as JSON each marker's seconds. Each marker is read
# and kept for its seconds again (GETEX); returns the values comma-separated ('' for none).
FILLED = """
local seconds, out = cjson.decode(ARGV[1]), {}
for k = 1, #KEYS do
  out[k] = redis.call('GETEX', KEYS[k], 'EX', seconds[k]) or ''
end
return table.concat(out, ',')
"""


def filled_generations(agents: list[tuple[int, int]]) -> list[int | None]:
    """For each (agent id, seconds its longest window spans), the generation whose stored
    events its windows were last filled with (None: never, or Redis lost them). Reading a
    marker keeps it for another `seconds` (one script for the batch): the windows of an agent
    whose events keep being counted stay complete, so they are filled from the database only
    after a new generation or a loss, not again every hour."""
    if not agents:
        return []
    reply = connection().register_script(FILLED)(
        keys=[FILLED_KEY.format(agent_id=a) for a, _ in agents],
        args=[json.dumps([seconds + 60 for _, seconds in agents])])
    text = reply.decode() if isinstance(reply, bytes) else reply
    return [int(v) if v else None for v in text.split(",")]


def mark_filled(marks: list[tuple[int, int, int]]) -> None:
    """Each (agent id, generation, seconds): the agent's windows hold its stored events for
    this generation (kept as long as its longest window past its last use, then filled again
    from what is stored). One pipeline."""
    pipe = connection().pipeline(transaction=False)
    for agent_id, generation, seconds in marks:
        pipe.set(FILLED_KEY.format(agent_id=agent_id), generation, ex=seconds + 60)
    pipe.execute()


def peek(check: WindowCheck, now: datetime) -> int:
    """How many members a window holds now (for a decision about an action not yet taken)."""
    return connection().zcount(check.key, now.timestamp() - check.seconds, now.timestamp())


def window_ids(keys: list[tuple[str, str, int]]) -> list[str]:
    """For each (rule key, candidate id, seconds): the id of the dedupe window it falls in.
    The first violation of a rule opens a window named after it; later ones within `seconds`
    land in the same window, so they are one finding."""
    if not keys:
        return []
    pipe = connection().pipeline(transaction=False)
    for rule_key, candidate, seconds in keys:
        pipe.set(f"bw:dedupe:{rule_key}", candidate, nx=True, ex=seconds)
        pipe.get(f"bw:dedupe:{rule_key}")
    replies = pipe.execute()
    return [value.decode() if isinstance(value, bytes) else value for value in replies[1::2]]
