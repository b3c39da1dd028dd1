"""Group windows in Redis: one sorted set per group rule and group key, members
"<agent id>|<event id>|<weight>" scored by time, so a retried event counts once and the agents
involved can be read back. One script adds an event, trims and totals the window, and names
the agents when the total is over the limit; it runs in the same pipeline as the per-agent
windows (runtime.windows)."""

import json
import uuid
from collections.abc import Iterable
from datetime import datetime

from redis.client import Pipeline

from runtime import windows
from runtime.group_rules import GroupCheck

FILLED_KEY = "gw:filled:{rule_id}:{revision}"

# KEYS: the window (a sorted set), its running total, its agents (a hash of member counts);
# ARGV: member ('' to only trim and read), score, now, seconds, report above, measure.
# The window is the last `seconds` up to now, whatever order events arrive in: once every
# event is in, the last one counted sees the whole window (a late event's own time does not
# hide members sent before it). The total and the agents are kept as members come and go, so
# an event costs O(log n) plus what it trims, never a scan of the window. Returns {total} at
# most ARGV[5] (the limit, or a budget's warning level), {total, agent id, ...} above it.
COUNT = """
local key, sum_key, agents_key = KEYS[1], KEYS[2], KEYS[3]
local seconds = tonumber(ARGV[4])
local lower = tonumber(ARGV[3]) - seconds
local function value(m) return tonumber(string.match(m, '|([^|]*)$')) or 0 end
local function agent(m) return string.match(m, '^([^|]*)|') end
if ARGV[1] ~= '' and redis.call('ZADD', key, tonumber(ARGV[2]), ARGV[1]) == 1 then
  redis.call('INCRBYFLOAT', sum_key, value(ARGV[1]))
  redis.call('HINCRBY', agents_key, agent(ARGV[1]), 1)
end
local old = redis.call('ZRANGEBYSCORE', key, '-inf', '(' .. lower)
if #old > 0 then
  local minus = 0
  for _, m in ipairs(old) do
    minus = minus + value(m)
    if redis.call('HINCRBY', agents_key, agent(m), -1) <= 0 then
      redis.call('HDEL', agents_key, agent(m))
    end
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. lower)
  redis.call('INCRBYFLOAT', sum_key, -minus)
end
for _, k in ipairs(KEYS) do redis.call('EXPIRE', k, seconds + 60) end
local total = redis.call('GET', sum_key) or '0'
if redis.call('ZCARD', key) == 0 then
  total = '0'
  redis.call('DEL', sum_key, agents_key)
end
if tonumber(total) <= tonumber(ARGV[5]) then return {total} end
local out = {total}
for _, a in ipairs(redis.call('HKEYS', agents_key)) do table.insert(out, a) end
return out
"""


# KEYS: the window, its running total; ARGV: now, seconds, limit. The score of the member whose
# leaving the window brings its total to the limit or under if nothing more arrives ('' when
# it is there already; also when rounding leaves the running total a hair over once every
# member is counted out, so the caller looks now and again later). Reads the oldest members a
# page at a time and stops there, never the whole window.
FALLS_BACK = """
local lower = tonumber(ARGV[1]) - tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local function value(m) return tonumber(string.match(m, '|([^|]*)$')) or 0 end
local total = tonumber(redis.call('GET', KEYS[2]) or '0')
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. lower)) do
  total = total - value(m)
end
if total <= limit then return '' end
local offset = 0
while true do
  local page = redis.call('ZRANGEBYSCORE', KEYS[1], lower, '+inf', 'WITHSCORES', 'LIMIT',
                          offset, 500)
  if #page == 0 then return '' end
  for i = 1, #page, 2 do
    total = total - value(page[i])
    if total <= limit then return page[i + 1] end
  end
  offset = offset + 500
end
"""


def falls_back_at(key: str, seconds: int, limit: float, now: datetime) -> datetime:
    """When a group window's total comes back to `limit` or under if no more events arrive:
    once the oldest of its members, as many as must go, have left it (`now` when it is there
    already). A look scheduled then finds it back under, unless events arrived since."""
    reply = windows.connection().register_script(FALLS_BACK)(
        keys=_keys(key)[:2], args=[now.timestamp(), seconds, limit])
    score = reply.decode() if isinstance(reply, bytes) else reply
    if not score:
        return now
    # a member leaves once its time is more than `seconds` old: a moment after, not at
    return datetime.fromtimestamp(float(score) + seconds + 1, tz=now.tzinfo)


def _keys(key: str) -> list[str]:
    return [key, f"{key}:sum", f"{key}:agents"]


def _script():  # noqa: ANN202 - redis-py's Script
    return windows.connection().register_script(COUNT)


def add_counts(pipe: Pipeline, checks: list[tuple[GroupCheck, datetime]], now: datetime) -> None:
    """Queue each (check, event time) on the pipeline; read the replies with `totals`."""
    script = _script()
    for check, moment in checks:
        script(keys=_keys(check.key), args=[check.member, moment.timestamp(),
                                            now.timestamp(), check.seconds,
                                            check.reported_above, check.measure], client=pipe)


def totals(replies: list) -> list[tuple[float, list[int]]]:
    """Each script reply as (window total, agent ids involved when over the limit)."""
    out = []
    for reply in replies:
        values = [v.decode() if isinstance(v, bytes) else str(v) for v in reply]
        out.append((round(float(values[0]), 6), [int(a) for a in values[1:]]))
    return out


def fill(checks: Iterable[tuple[GroupCheck, datetime]], now: datetime) -> None:
    """Put stored events into their group windows without judging them (the same script,
    so the running totals stay right; an event already there is not counted twice)."""
    pipe = windows.connection().pipeline(transaction=False)
    script = _script()
    for check, moment in checks:
        script(keys=_keys(check.key), args=[check.member, moment.timestamp(), now.timestamp(),
                                            check.seconds, "1e300", check.measure], client=pipe)
    pipe.execute()


# KEYS[1], KEYS[2]: the windows' epoch and its run (windows.CURRENT_EPOCH); KEYS[3..]: the
# rules' fill markers. Returns the epoch and the markers' values ('' for none) as JSON.
FILLED = windows.CURRENT_EPOCH + """
local out = {current_epoch(KEYS[1], KEYS[2], ARGV[1])}
for k = 3, #KEYS do
  out[k - 1] = redis.call('GET', KEYS[k]) or ''
end
return cjson.encode(out)
"""


def filled(rules: list[tuple[int, int]]) -> tuple[str, list[bool]]:
    """The windows' epoch, and for each (rule id, revision) whether its windows were filled
    from stored events in that epoch (since Redis last lost them, or restarted: a marker
    restored with an older snapshot is of an older epoch)."""
    if not rules:
        return "", []
    reply = windows.connection().register_script(FILLED)(
        keys=[windows.EPOCH_KEY, windows.RUN_KEY,
              *(FILLED_KEY.format(rule_id=r, revision=v) for r, v in rules)],
        args=[uuid.uuid4().hex])
    epoch, *markers = json.loads(reply)
    return epoch, [marker == epoch for marker in markers]


def mark_filled(rule_id: int, revision: int, seconds: int, epoch: str) -> None:
    """The rule's windows hold the stored events of its last `seconds`, filled in `epoch`
    (the one `filled` answered: if Redis lost them meanwhile, the marker vouches for nothing)."""
    windows.connection().set(FILLED_KEY.format(rule_id=rule_id, revision=revision), epoch,
                             ex=seconds + 60)


def count_with_groups(agent_checks: list, group: list[tuple[GroupCheck, datetime]],
                      now: datetime) -> tuple[list[int], list[tuple[float, list[int]]]]:
    """Per-agent windows (as windows.count) and group windows in one pipeline, one round
    trip: each per-agent window's count, and each group window's (total, agents over it)."""
    if not group:
        return windows.count(agent_checks, now), []
    pipe = windows.connection().pipeline(transaction=False)
    if agent_checks:
        windows.add_counts(pipe, agent_checks, now)
    add_counts(pipe, group, now)
    replies = pipe.execute()
    return (windows.counts(replies[0]) if agent_checks else []), totals(replies[-len(group):])


def peek_window(key: str, seconds: int, measure: str, now: datetime
                ) -> tuple[float, list[int]]:
    """A group window's total now and the ids of the agents whose events are in it, without
    adding anything."""
    (reply,) = totals([_script()(keys=_keys(key), args=["", 0, now.timestamp(), seconds, "-1",
                                                        measure])])
    return reply


def peek_total(key: str, seconds: int, measure: str, now: datetime) -> float:
    """A group window's total now, without adding anything (for a decision not yet taken)."""
    (reply,) = totals([_script()(keys=_keys(key), args=["", 0, now.timestamp(), seconds, "1e300",
                                                        measure])])
    return reply[0]
