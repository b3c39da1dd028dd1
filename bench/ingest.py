"""Ingest throughput: behaviour events per second through POST /api/v1/events on a real daphne
server (bulk insert, sliding windows in Redis), 1,000-event batches from 2 client threads.
Prints one JSON line.

With --group-rules: 1,000 agents in ten teams, events spread across them, measured twice in
the same run: first with per-agent rules only, then with three group rules on (reads of one
customer's record across all agents, calls and tokens per team); prints both figures and how
many times slower group rules make ingest (the target: at most 2).

Usage: python bench/ingest.py [EVENTS] [--group-rules]   (scratch stores: see bench/scratch.py)
"""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import build_cluster  # noqa: E402
from bench.scratch import setup_django  # noqa: E402
from config.embedded_redis import free_port, port_answers  # noqa: E402

BATCH = 1000


def batch(agent: str, size: int) -> bytes:
    now = datetime.now(UTC).isoformat()
    return json.dumps([
        {"id": uuid.uuid4().hex, "agent": agent, "ts": now, "kind": "data_access",
         "resource": "customers_db" if i % 2 else "orders_db", "record": uuid.uuid4().hex,
         "tool": "orders.lookup"} for i in range(size)]).encode()


def fleet_batch(size: int, agents: int = 1000) -> bytes:
    import random

    now = datetime.now(UTC).isoformat()
    return json.dumps([
        {"id": uuid.uuid4().hex, "agent": f"bench-{random.randrange(agents):05d}", "ts": now,
         "kind": "data_access", "resource": "customers_db",
         "record": f"customer-{random.randrange(5000)}", "tool": "orders.lookup",
         "input_tokens": random.randrange(100, 2000), "output_tokens": 100}
        for _ in range(size)]).encode()


def _send_all(port: int, key: str, bodies: list[bytes]) -> tuple[int, float]:
    accepted: list[int] = []

    def send(mine: list[bytes]) -> None:
        for body in mine:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/api/v1/events", data=body, method="POST",
                headers={"Content-Type": "application/json", "Authorization": f"Token {key}"})
            with urllib.request.urlopen(request, timeout=120) as response:
                accepted.append(json.loads(response.read())["accepted"])

    started = time.perf_counter()
    threads = [threading.Thread(target=send, args=(bodies[i::2],)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(accepted), time.perf_counter() - started


def main_group_rules(total: int) -> None:
    """Per-agent rules only, then with group rules, on 1,000 agents in the same run."""
    setup_django()
    from django.contrib.auth.models import User
    from django.db import connection

    from registry import actions
    from registry.choices import Role
    from registry.models import Agent
    from runtime.actions.group_rules import create_group_rule

    ids = build_cluster(1000)
    for team in range(10):
        Agent.objects.filter(pk__in=ids[team::10]).update(labels={"team": f"team-{team}"})
    admin, _ = User.objects.get_or_create(username="bench-admin", is_superuser=True)
    _, key = actions.issue_api_token(admin, actor="system:bench")
    compliance, _ = User.objects.get_or_create(username="bench-compliance")
    actions.grant_role(compliance, Role.COMPLIANCE, actor="system:bench")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p",
                               str(port), "config.asgi:application"], cwd=ROOT,
                              env=dict(os.environ), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    results = {}
    try:
        while not port_answers("127.0.0.1", port):
            time.sleep(0.1)
        _send_all(port, key, [fleet_batch(10)])  # warm up
        for phase in ("per_agent", "group_rules"):
            if phase == "group_rules":
                create_group_rule(actor=compliance, name="one-customer", measure="events",
                                  limit=50, per="1h", per_record=True,
                                  match={"kind": "data_access", "resource": "customers_db"})
                for team in range(10):
                    create_group_rule(actor=compliance, name=f"team-{team}-calls",
                                      measure="events", limit=100000, per="1h",
                                      selector={"team": f"team-{team}"})
                    create_group_rule(actor=compliance, name=f"team-{team}-tokens",
                                      measure="tokens", limit=10**9, per="1h",
                                      selector={"team": f"team-{team}"},
                                      match={"kind": "data_access"})
                _send_all(port, key, [fleet_batch(10)])  # the group windows' first fill
            bodies = [fleet_batch(BATCH) for _ in range(total // BATCH)]
            events, seconds = _send_all(port, key, bodies)
            results[phase] = (events, seconds)
    finally:
        server.terminate()
        server.wait(timeout=30)
    per_agent = results["per_agent"][0] / results["per_agent"][1]
    grouped = results["group_rules"][0] / results["group_rules"][1]
    print(json.dumps({
        "bench": "ingest_group_rules",
        "database": connection.vendor,
        "agents": 1000,
        "group_rules": 21,
        "events": results["group_rules"][0],
        "batch": BATCH,
        "clients": 2,
        "per_agent_events_per_second": round(per_agent),
        "group_rules_events_per_second": round(grouped),
        "slowdown": round(per_agent / grouped, 2),
        "target_slowdown_at_most": 2,
    }))


def main(total: int) -> None:
    setup_django()
    from django.contrib.auth.models import User
    from django.db import connection

    from registry import actions

    build_cluster(1)
    admin, _ = User.objects.get_or_create(username="bench-admin", is_superuser=True)
    _, key = actions.issue_api_token(admin, actor="system:bench")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p",
                               str(port), "config.asgi:application"], cwd=ROOT,
                              env=dict(os.environ), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        while not port_answers("127.0.0.1", port):
            time.sleep(0.1)
        bodies = [batch("bench-00000", BATCH) for _ in range(total // BATCH)]
        accepted = []

        def send(mine: list[bytes]) -> None:
            for body in mine:
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/api/v1/events", data=body, method="POST",
                    headers={"Content-Type": "application/json",
                             "Authorization": f"Token {key}"})
                with urllib.request.urlopen(request, timeout=60) as response:
                    accepted.append(json.loads(response.read())["accepted"])

        send([batch("bench-00000", 10)])  # warm up the server and its connections
        started = time.perf_counter()
        threads = [threading.Thread(target=send, args=(bodies[i::2],)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(json.dumps({
        "bench": "ingest",
        "database": connection.vendor,
        "events": sum(accepted),
        "batch": BATCH,
        "clients": 2,
        "seconds": round(elapsed, 3),
        "events_per_second": round(sum(accepted) / elapsed),
    }))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    count = int(args[0]) if args else 50_000
    (main_group_rules if "--group-rules" in sys.argv else main)(count)
