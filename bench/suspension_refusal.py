"""Suspension -> first refused call, for a governed agent calling a refund tool in a loop.

Each sample: a real Pydantic AI agent (an offline FunctionModel that calls `payments.refund`
at once) governed by the adapter against a real daphne server, with a 30 s watch interval (so
only the desired-state long-poll can bring a suspension in before the next tick); a thread
runs the agent in a loop; the agent is suspended (the `suspend_agent` action, as the
reconciler or a human does it); the time from calling the action (which commits inside) to
the loop's first refused call is recorded, and the refunds that ran after that call began are
counted. Prints one JSON line
with p50/p95 beside the floor measured in the same run: one desired-state GET of the same
agent (the request the woken long-poll must still answer).

Usage: python bench/suspension_refusal.py [SAMPLES]   (scratch stores: see bench/scratch.py)
"""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import build_cluster  # noqa: E402
from bench.scratch import setup_django  # noqa: E402
from config.embedded_redis import free_port, port_answers  # noqa: E402

INTERVAL = 30.0  # the adapter's watch interval: a poll would take up to this long


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def floor_ms(base: str, name: str, key: str) -> float:
    started = time.perf_counter()
    request = urllib.request.Request(f"{base}/api/v1/agents/{name}/desired-state",
                                     headers={"Authorization": f"Token {key}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
    return (time.perf_counter() - started) * 1000


def sample(base: str, name: str, key: str) -> tuple[float, int]:
    """(ms from the suspension's commit to the first refused call, refunds after it)."""
    from agentgov import Client
    from agentgov.adapters.pydantic_ai import govern
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from reconciliation.actions import suspend_agent
    from registry.models import Agent as Registered

    def model(messages, info):
        if any(isinstance(part, ToolReturnPart) for message in messages
               for part in getattr(message, "parts", [])):
            return ModelResponse(parts=[TextPart(str(messages[-1].parts[-1].content))])
        return ModelResponse(parts=[ToolCallPart("payments.refund",
                                                 {"order": "o-1", "amount": 10})])

    agent = Agent(FunctionModel(model, model_name="gpt-4.1"))
    refunds: list[float] = []

    @agent.tool_plain(name="payments.refund")
    def refund(order: str, amount: float) -> str:
        refunds.append(time.perf_counter())
        return "refunded"

    client = Client(base, key, agent=name, event_flush_interval=0.2)
    governor = govern(agent, client=client, name=name,
                      resources={"payments.refund": "payments"}, interval=INTERVAL).start()
    deadline = time.monotonic() + 60
    while governor.applied is None:
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: the adapter never applied its desired state")
        time.sleep(0.01)
    refused: list[float] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            if "suspended" in agent.run_sync("refund").output:
                refused.append(time.perf_counter())
                return

    looping = threading.Thread(target=loop, daemon=True)
    looping.start()
    time.sleep(0.3)  # looping, and the watch's long-poll held
    registered = Registered.objects.get(name=name)
    # Timed from the call: the commit (and its publish) happens inside it, in autocommit, so
    # this counts the action's own work too (an upper bound).
    suspended = time.perf_counter()
    suspend_agent(registered, actor="system:bench", reason="bench")
    looping.join(timeout=60)
    stop.set()
    governor.stop(timeout=0)  # its watch thread ends with its held poll (a daemon)
    if not refused:
        raise SystemExit(f"{name}: no call was refused within 60 s of the suspension")
    return (refused[0] - suspended) * 1000, sum(1 for at in refunds if at > suspended)


def main(samples: int) -> None:
    setup_django()
    from django.contrib.auth.models import User
    from django.db import connection

    from registry import actions as registry_actions
    from registry.models import Agent

    ids = build_cluster(samples, connector="push")
    owner = User.objects.get(username="bench-owner")
    agents = [(agent.name, registry_actions.issue_agent_token(agent, actor=owner)[1])
              for agent in Agent.objects.filter(pk__in=ids).order_by("pk")]
    connection.close()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p",
                               str(port), "config.asgi:application"], cwd=ROOT,
                              env=dict(os.environ), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    latencies, after, floors = [], [], []
    try:
        while not port_answers("127.0.0.1", port):
            if server.poll() is not None:
                raise SystemExit("the web server did not start")
            time.sleep(0.1)
        for name, key in agents:
            floor_ms(base, name, key)  # warm: the floor is a request, not a first request
            floors.append(floor_ms(base, name, key))
            latency, ran_after = sample(base, name, key)
            latencies.append(latency)
            after.append(ran_after)
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(json.dumps({
        "bench": "suspension_refusal", "samples": len(latencies),
        "watch_interval_s": INTERVAL,
        "p50_ms": round(percentile(latencies, 0.5), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "floor_p95_ms": round(percentile(floors, 0.95), 1),
        "refunds_after_suspension_max": max(after),
        "refunds_after_suspension_total": sum(after),
    }))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
