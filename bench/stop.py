"""The stop button -> the last governed call refused, across a fleet of agents.

By default (decision calls): a fleet of AGENTS push agents (default 1,000), each with its own
token, each asking `POST /api/v1/agents/{name}/decisions` before a governed call (as an adapter
does before a sensitive action), CONCURRENCY calls in flight at a time, round after round. The
floor is one round of every agent's call with nothing stopped, timed from the round's start.
Then the round that runs while a compliance person presses stop for the whole fleet: each
agent's time is from the stop request's start to its first call refused by the stop. Any call
started after the stop request returned that is still allowed fails the run. Prints one JSON
line: p50, p95 and the last agent refused, beside the floor's p50, p95 and last.

`--long-poll`: each agent instead holds the
request its adapter or MCP proxy holds to follow its desired state (`GET desired-state?wait=60`
with its ETag: agentgov's `Client.watch`) against a real daphne server, all at once. A
compliance person presses stop for the whole fleet through `POST /api/v1/stops`; each agent's
time is from that request's start to its long-poll answering `running: false` (from then on
its gate refuses every governed call). Its decisions are denied from the commit on (one is
asked after the stop and checked). Prints one JSON line: p50, p95 and max (the last agent
refused) beside how long the stop request itself took.

A held long-poll keeps a database connection for each agent today, so the long-poll mode
needs a PostgreSQL that accepts AGENTS connections; the decision mode does not.

Usage: python bench/stop.py [AGENTS] [--long-poll]   (scratch stores: see bench/scratch.py)
"""

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import build_cluster  # noqa: E402
from bench.scratch import setup_django  # noqa: E402
from config.embedded_redis import free_port, port_answers  # noqa: E402

WAIT = 60
CONCURRENCY = 32  # decision calls in flight at once (the web server's threads are fewer)
STARTING = 16  # agents starting at once (each first request holds a database connection)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def follow(client, base: str, name: str, key: str, starting: asyncio.Semaphore,
                 ready: list[str], refused: dict[str, float]) -> None:
    """What an adapter's watch does: hold the desired state until it says not running."""
    url = f"{base}/api/v1/agents/{name}/desired-state"
    headers = {"Authorization": f"Token {key}"}
    async with starting:
        first = await client.get(url, headers=headers)
    first.raise_for_status()
    etag = first.headers["ETag"]
    ready.append(name)
    while True:
        answer = await client.get(url, params={"wait": WAIT},
                                  headers={**headers, "If-None-Match": etag})
        if answer.status_code == 200:
            if answer.json()["running"] is False:
                refused[name] = time.perf_counter()
                return
            etag = answer.headers["ETag"]


async def run(base: str, agents: list[tuple[str, str]], person_key: str) -> dict:
    import httpx

    limits = httpx.Limits(max_connections=len(agents) + 20,
                          max_keepalive_connections=len(agents) + 20)
    refused: dict[str, float] = {}
    ready: list[str] = []
    async with httpx.AsyncClient(limits=limits, timeout=WAIT + 60) as client:
        starting = asyncio.Semaphore(STARTING)
        tasks = [asyncio.create_task(follow(client, base, name, key, starting, ready,
                                            refused))
                 for name, key in agents]
        while len(ready) < len(agents):
            await asyncio.sleep(0.1)
        await asyncio.sleep(2.0)  # every poll held (the first answers are in)
        started = time.perf_counter()
        answer = await client.post(f"{base}/api/v1/stops", headers={
            "Authorization": f"Token {person_key}"},
            json={"scope": "fleet", "reason": "bench: stop everything"})
        stop_ms = (time.perf_counter() - started) * 1000
        answer.raise_for_status()
        name, key = agents[len(agents) // 2]
        decided = await client.post(f"{base}/api/v1/agents/{name}/decisions",
                                    headers={"Authorization": f"Token {key}"},
                                    json={"action": "payments.refund", "amount": 10})
        if decided.json().get("outcome") != "deny":
            raise SystemExit(f"a decision after the stop was not denied: {decided.text}")
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=WAIT * 3)
    latencies = [(at - started) * 1000 for at in refused.values()]
    return {"stop_request_ms": round(stop_ms, 1), "latencies": latencies}


async def ask(client, base: str, name: str, key: str) -> dict:
    """One governed call's decision, as an adapter asks it before a refund of 10."""
    answer = await client.post(f"{base}/api/v1/agents/{name}/decisions",
                               headers={"Authorization": f"Token {key}"},
                               json={"action": "payments.refund", "amount": 10})
    return answer.json() if answer.status_code in (200, 201) else {"outcome": "error"}


async def one_round(client, base: str, agents: list[tuple[str, str]],
                    answered: dict[str, float], until_refused: bool = False,
                    stopped_at: list[float] | None = None) -> int:
    """Every agent's call, CONCURRENCY at a time; `answered` gets each agent's time (of its
    first refusal by a stop when `until_refused`). Returns the calls allowed that started
    after the stop request had returned (`stopped_at`)."""
    queue: asyncio.Queue = asyncio.Queue()
    for agent in agents:
        queue.put_nowait(agent)
    late_allows = 0

    async def worker() -> None:
        nonlocal late_allows
        while not queue.empty():
            name, key = queue.get_nowait()
            asked = time.perf_counter()
            decision = await ask(client, base, name, key)
            if not until_refused:
                answered[name] = time.perf_counter()
                continue
            if decision.get("outcome") == "deny" and str(decision.get("rule", "")).startswith(
                    "stop "):
                answered[name] = time.perf_counter()
                continue
            if decision.get("outcome") == "allow" and stopped_at and asked > stopped_at[0]:
                late_allows += 1
            queue.put_nowait((name, key))  # not refused yet: it asks again

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return late_allows


async def run_decisions(base: str, agents: list[tuple[str, str]], person_key: str) -> dict:
    import httpx

    limits = httpx.Limits(max_connections=CONCURRENCY + 4,
                          max_keepalive_connections=CONCURRENCY + 4)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        await one_round(client, base, agents, {})  # warm
        floor: dict[str, float] = {}
        floor_start = time.perf_counter()
        await one_round(client, base, agents, floor)
        refused: dict[str, float] = {}
        stopped_at: list[float] = []

        async def press() -> float:
            answer = await client.post(f"{base}/api/v1/stops", headers={
                "Authorization": f"Token {person_key}"},
                json={"scope": "fleet", "reason": "bench: stop everything"})
            answer.raise_for_status()
            stopped_at.append(time.perf_counter())
            return stopped_at[0]

        started = time.perf_counter()
        pressed, late_allows = await asyncio.wait_for(asyncio.gather(
            press(), one_round(client, base, agents, refused, until_refused=True,
                               stopped_at=stopped_at)), timeout=600)
    if late_allows:
        raise SystemExit(f"{late_allows} calls started after the stop returned were allowed")
    return {"stop_request_ms": (pressed - started) * 1000,
            "latencies": [(at - started) * 1000 for at in refused.values()],
            "floor": [(at - floor_start) * 1000 for at in floor.values()]}


def main(count: int, long_poll: bool = False) -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    setup_django()
    from django.contrib.auth.models import User
    from django.db import connection

    from registry import actions as registry_actions
    from registry.choices import Role
    from registry.models import Agent

    ids = build_cluster(count, connector="push")
    owner = User.objects.get(username="bench-owner")
    agents = [(agent.name, registry_actions.issue_agent_token(agent, actor=owner)[1])
              for agent in Agent.objects.filter(pk__in=ids).order_by("pk")]
    dana, _ = registry_actions.create_person("bench-dana", actor="system:bench")
    registry_actions.grant_role(dana, Role.COMPLIANCE, actor="system:bench")
    person_key = registry_actions.issue_api_token(dana, actor="system:bench")[1]
    connection.close()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p",
                               str(port), "config.asgi:application"], cwd=ROOT,
                              env=dict(os.environ), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        while not port_answers("127.0.0.1", port):
            if server.poll() is not None:
                raise SystemExit("the web server did not start")
            time.sleep(0.1)
        result = asyncio.run(run(base, agents, person_key) if long_poll
                             else run_decisions(base, agents, person_key))
    finally:
        server.terminate()
        server.wait(timeout=10)
    latencies = result["latencies"]
    line = {
        "bench": "stop", "via": "long-poll" if long_poll else "decisions",
        "agents": len(agents), "refused": len(latencies),
        "stop_request_ms": round(result["stop_request_ms"], 1),
        "p50_ms": round(percentile(latencies, 0.5), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "last_ms": round(max(latencies), 1),
    }
    if "floor" in result:  # the same round of calls with nothing stopped
        line.update({"concurrency": CONCURRENCY,
                     "floor_p50_ms": round(percentile(result["floor"], 0.5), 1),
                     "floor_p95_ms": round(percentile(result["floor"], 0.95), 1),
                     "floor_last_ms": round(max(result["floor"]), 1)})
    print(json.dumps(line))


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--long-poll"]
    main(int(arguments[0]) if arguments else 1000, long_poll="--long-poll" in sys.argv[1:])
