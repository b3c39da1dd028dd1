"""What the product asks of the Redis it is pointed at, checked where it can be said plainly
(/readyz, a worker's start) instead of failing on first use: Redis 6.2 or newer
(docs/operating.md). Every client speaks RESP3 (`HELLO 3`, Redis 6 and newer; an older server
refuses the connection's first command), ingest reads its windows' fill markers with `GETEX`,
and RQ's workers take jobs with `BLMOVE` (`LMOVE` is its non-blocking form), both 6.2's. The
windows' scripts also read the server's `run_id` from `INFO server` (a window filled before a
restart is not trusted after it: runtime/windows.py).

A server that does not know one of them (an older Redis, or one with the command renamed
away) is refused: the product would accept events and never judge them, or run no job."""

import redis

MINIMUM = "Redis 6.2 or newer"
# Each asked of keys no one writes: GETEX of a missing key and LMOVE from an empty list
# answer nil and change nothing.
_PROBE_KEY = "agentgov:capability-probe"
PROBES = (("GETEX", (_PROBE_KEY,)),
          ("LMOVE", (_PROBE_KEY, _PROBE_KEY + ":to", "LEFT", "RIGHT")),
          ("INFO", ("server",)))


class TooOld(Exception):
    """This Redis lacks what the product needs; the message says what and which version."""


def _unknown_command(error: redis.ResponseError) -> bool:
    return str(error).lower().startswith("unknown command")


def check(client: redis.Redis) -> None:
    """Raise TooOld when the server behind `client` cannot run the product; any other
    RedisError (down, wrong password, a command refused by its ACL) propagates as it is."""
    try:
        client.ping()
    except redis.ResponseError as error:
        if not (_unknown_command(error) and "hello" in str(error).lower()):
            raise
        raise TooOld(f"this Redis does not speak RESP3 (HELLO): the product needs {MINIMUM}"
                     ) from None
    missing = []
    for command, args in PROBES:
        try:
            answer = client.execute_command(command, *args)
        except redis.ResponseError as error:
            if not _unknown_command(error):
                raise
            missing.append(command)
            continue
        if command == "INFO" and not _run_id(answer):
            missing.append("a run_id in INFO server")
    if missing:
        raise TooOld(f"this Redis ({_version(client)}) lacks {', '.join(missing)}: the "
                     f"product needs {MINIMUM}")


def _run_id(info: object) -> str:
    """The server's run_id in INFO's answer (parsed by redis-py, or its raw text)."""
    if isinstance(info, dict):
        return str(info.get("run_id") or "")
    text = info.decode() if isinstance(info, bytes) else str(info)
    return next((line.split(":", 1)[1].strip() for line in text.splitlines()
                 if line.startswith("run_id:")), "")


def _version(client: redis.Redis) -> str:
    """The server's version as it reports it, for the message only."""
    try:
        found = client.info("server").get("redis_version")
    except redis.RedisError:
        found = None
    return f"version {found}" if found else "version unknown"
