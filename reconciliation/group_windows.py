"""Group windows in Redis: one sorted set per group rule and group key, members
"<agent id>|<event id>|<weight>" scored by time, so a retried event counts once and the agents
involved can be read back. One script adds an event, trims and totals the window, and names
the agents when the total is over the limit; it runs in the same pipeline as the per-agent
windows (reconciliation.windows)."""

from collections.abc import Iterable
from datetime import datetime

from redis.client import Pipeline

from reconciliation import windows
from reconciliation.group_rules import GroupCheck

FILLED_KEY = "gw:filled:{rule_id}:{revision}"

# KEYS[1] the window; ARGV: member, score, now, seconds, limit, measure.
# The window is the last `seconds` up to now, whatever order events arrive in: once every
# event is in, the last one counted sees the whole window (a late event's own time does not
# hide members sent before it). Returns {total} at most ARGV[5] (the limit, or a budget's
# warning level), {total, agent id, ...} above it.
COUNT = """
local key, seconds = KEYS[1], tonumber(ARGV[4])
local lower = tonumber(ARGV[3]) - seconds
redis.call('ZADD', key, tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. lower)
redis.call('EXPIRE', key, seconds + 60)
local members
local total = 0
if ARGV[6] == 'events' then
  total = redis.call('ZCOUNT', key, lower, '+inf')
else
  members = redis.call('ZRANGEBYSCORE', key, lower, '+inf')
  for _, m in ipairs(members) do
    total = total + (tonumber(string.match(m, '|([^|]*)$')) or 0)
  end
end
if total <= tonumber(ARGV[5]) then return {tostring(total)} end
members = members or redis.call('ZRANGEBYSCORE', key, lower, '+inf')
local seen, out = {}, {tostring(total)}
for _, m in ipairs(members) do
  local agent = string.match(m, '^([^|]*)|')
  if agent and not seen[agent] then seen[agent] = true; table.insert(out, agent) end
end
return out
"""


def _script():  # noqa: ANN202 - redis-py's Script
    return windows.connection().register_script(COUNT)


def add_counts(pipe: Pipeline, checks: list[tuple[GroupCheck, datetime]], now: datetime) -> None:
    """Queue each (check, event time) on the pipeline; read the replies with `totals`."""
    script = _script()
    for check, moment in checks:
        script(keys=[check.key], args=[check.member, moment.timestamp(), now.timestamp(),
                                       check.seconds, check.reported_above, check.measure],
               client=pipe)


def totals(replies: list) -> list[tuple[float, list[int]]]:
    """Each script reply as (window total, agent ids involved when over the limit)."""
    out = []
    for reply in replies:
        values = [v.decode() if isinstance(v, bytes) else str(v) for v in reply]
        out.append((float(values[0]), [int(a) for a in values[1:]]))
    return out


def fill(checks: Iterable[tuple[GroupCheck, datetime]], now: datetime) -> None:
    """Put stored events into their group windows without judging them."""
    pipe = windows.connection().pipeline(transaction=False)
    seen: dict[str, int] = {}
    for check, moment in checks:
        pipe.zadd(check.key, {check.member: moment.timestamp()})
        seen[check.key] = check.seconds
    for key, seconds in seen.items():
        pipe.zremrangebyscore(key, "-inf", now.timestamp() - seconds)
        pipe.expire(key, seconds + 60)
    pipe.execute()


def filled(rules: list[tuple[int, int]]) -> list[bool]:
    """For each (rule id, revision): whether its windows were filled from stored events since
    Redis last lost them."""
    if not rules:
        return []
    values = windows.connection().mget(
        [FILLED_KEY.format(rule_id=r, revision=v) for r, v in rules])
    return [v is not None for v in values]


def mark_filled(rule_id: int, revision: int, seconds: int) -> None:
    """The rule's windows hold the stored events of its last `seconds`."""
    windows.connection().set(FILLED_KEY.format(rule_id=rule_id, revision=revision), 1,
                             ex=seconds + 60)


def count_with_groups(agent_checks: list, group: list[tuple[GroupCheck, datetime]],
                      now: datetime) -> tuple[list[int], list[tuple[float, list[int]]]]:
    """Per-agent windows (as windows.count) and group windows in one pipeline, one round
    trip: each per-agent window's count, and each group window's (total, agents over it)."""
    if not group:
        return windows.count(agent_checks, now), []
    pipe = windows.connection().pipeline(transaction=False)
    if agent_checks:
        windows._add(pipe, agent_checks, now)
        for check, _, moment in agent_checks:
            pipe.zcount(check.key, moment.timestamp() - check.seconds, moment.timestamp())
    add_counts(pipe, group, now)
    replies = pipe.execute()
    group_replies = replies[-len(group):]
    agent_counts = replies[:-len(group)][-len(agent_checks):] if agent_checks else []
    return agent_counts, totals(group_replies)


def peek_total(key: str, seconds: int, measure: str, now: datetime) -> float:
    """A group window's total now, without adding anything (for a decision not yet taken)."""
    lower = now.timestamp() - seconds
    connection = windows.connection()
    if measure == "events":
        return float(connection.zcount(key, lower, "+inf"))
    members = connection.zrangebyscore(key, lower, "+inf")
    return sum(float(m.decode().rsplit("|", 1)[1]) for m in members)
