"""Ingest throughput: behaviour events per second through POST /api/v1/events on real daphne
servers (every rule checked: the agent's tools, data and actions, its sliding windows in
Redis, the outbox), 1,000-event batches from client threads (2 per web process unless
--clients says), against the floor measured in the same run, in turns with the product (a
quarter of the batches each turn): the same events decoded and COPYed (in binary, as the
product does) into a table of the events table's columns with a unique (agent, id), plus
one Redis ZADD per event (one pipeline per batch), in one process with the web process's
collector settings. The web processes run as deployed (DEBUG off, bench/scratch.py's
deployed_env). Prints one JSON line per web-process count, with the CPU a batch costs the
web processes and, when PostgreSQL and Redis run on this machine, the stores' own (product
and floor alike).

With --group-rules: 1,000 agents in ten teams, events spread across them, measured twice in
the same run: first with per-agent rules only, then with three group rules on (reads of one
customer's record across all agents, calls and tokens per team); prints both figures and how
many times slower group rules make ingest (the target: at most 2).

Usage: python bench/ingest.py [EVENTS] [--web 1,2,4] [--agents N] [--clients N] [--group-rules]
(--clients: client threads per web process, 2 unless given)
(scratch stores: see bench/scratch.py)
"""

import argparse
import gc
import json
import os
import random
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

from bench.cluster import Processes, build_cluster  # noqa: E402
from bench.scratch import deployed_env, setup_django  # noqa: E402
from config.embedded_redis import free_port, port_answers  # noqa: E402

BATCH = 1000
CLIENTS_PER_PROCESS = 2
ROUNDS = 4  # the floor and the product take turns this many times (see main)
FLOOR_TABLE = "bench_ingest_floor"


def batch(agents: int, size: int, first: int | None = None) -> bytes:
    """Reads of orders and customers by `agents` agents (bench-00000...), half of them under
    the customers_db limits (calls per hour, reads of one record): by agents at random, or
    with `first`, by agents first, first + 1, ... in turn."""
    now = datetime.now(UTC).isoformat()
    picks = [random.randrange(agents) if first is None else (first + i) % agents
             for i in range(size)]
    return json.dumps([
        {"id": uuid.uuid4().hex, "ts": now, "agent": f"bench-{picks[i]:05d}",
         "kind": "data_access", "resource": "customers_db" if i % 2 else "orders_db",
         "record": uuid.uuid4().hex, "tool": "orders.lookup"} for i in range(size)]).encode()


def fleet_batch(size: int, agents: int = 1000) -> bytes:
    now = datetime.now(UTC).isoformat()
    return json.dumps([
        {"id": uuid.uuid4().hex, "agent": f"bench-{random.randrange(agents):05d}", "ts": now,
         "kind": "data_access", "resource": "customers_db",
         "record": f"customer-{random.randrange(5000)}", "tool": "orders.lookup",
         "input_tokens": random.randrange(100, 2000), "output_tokens": 100}
        for _ in range(size)]).encode()


class WebProcesses(Processes):
    """`count` daphne processes, each on its own port, on the bench's stores."""

    def __init__(self, count: int) -> None:
        self.ports = [free_port() for _ in range(count)]
        env = deployed_env()
        self.processes = [
            subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p",
                              str(port), "config.asgi:application"], cwd=ROOT,
                             env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
            for port in self.ports]

    def cpu_seconds(self) -> float:
        """CPU time the web processes have used so far (user and system, from /proc)."""
        return sum(cpu_of(process.pid) for process in self.processes)

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        for port in self.ports:
            while not port_answers("127.0.0.1", port):
                if time.monotonic() > deadline:
                    raise SystemExit("daphne did not start")
                time.sleep(0.1)


def cpu_of(pid: int | str) -> float:
    """CPU seconds (user and system) a process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # 14th, 15th


STORES = {"postgres": "postgresql", "redis-server": "redis"}


def stores_cpu() -> dict[str, float]:
    """CPU seconds used so far by this machine's PostgreSQL and Redis server processes (every
    one of them: the bench is meant to run alone); 0 for a store not running here."""
    used = dict.fromkeys(STORES.values(), 0.0)
    for entry in Path("/proc").iterdir():
        try:
            store = STORES.get((entry / "comm").read_text().strip()) if entry.name.isdigit() \
                else None
            if store:
                used[store] += cpu_of(entry.name)
        except OSError:  # gone meanwhile
            continue
    return used


def per_batch(used: dict[str, float], batches: int) -> dict[str, float | None]:
    """Milliseconds of each store's CPU a batch (None for a store not running here)."""
    return {store: round(seconds / batches * 1000, 1) if seconds else None
            for store, seconds in used.items()}


def send_all(ports: list[int], key: str, bodies: list[bytes],
             per_process: int = CLIENTS_PER_PROCESS) -> tuple[int, float]:
    """POST every body, `per_process` client threads per web process; (events
    accepted, seconds)."""
    accepted: list[int] = []
    failures: list[str] = []

    def send(port: int, mine: list[bytes]) -> None:
        for body in mine:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/api/v1/events", data=body, method="POST",
                headers={"Content-Type": "application/json", "Authorization": f"Token {key}"})
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    accepted.append(json.loads(response.read())["accepted"])
            except Exception as error:  # noqa: BLE001 - reported below, the bench fails
                failures.append(repr(error))
                return

    clients = [ports[i % len(ports)] for i in range(len(ports) * per_process)]
    started = time.perf_counter()
    threads = [threading.Thread(target=send, args=(port, bodies[i::len(clients)]))
               for i, port in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"requests failed: {failures[:3]}")
    return sum(accepted), time.perf_counter() - started


class Floor:
    """The same events decoded, COPYed (in binary) into a table of the events table's columns
    with a unique (agent, id), one transaction per batch, and one ZADD per event in one
    pipeline per batch: what storing and windowing them costs at the least, in one process
    with the web process's collector settings. Its table is kept across `run`s (as the
    product's tables are) until `drop`."""

    columns = ("id", "event_id", "agent_name", "ts", "kind", "tool", "resource", "record",
               "action", "approved_by", "decision_id", "trace_id", "span_id", "source",
               "model", "operation", "error", "received_at", "sender", "foreign")

    def __init__(self) -> None:
        from django.db import connection

        from config import queues

        self.redis = queues.queue("ingest").connection
        names = ", ".join(connection.ops.quote_name(c) for c in self.columns)
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {FLOOR_TABLE}")
            cursor.execute(f"CREATE TABLE {FLOOR_TABLE} (LIKE reconciliation_behaviourevent "
                           "INCLUDING DEFAULTS)")
            cursor.execute(f"CREATE UNIQUE INDEX {FLOOR_TABLE}_key ON {FLOOR_TABLE} "
                           "(agent_name, event_id)")
            cursor.execute(f"SELECT {names} FROM {FLOOR_TABLE} LIMIT 0")
            self.types = [column.type_code for column in cursor.description]
        # binary, as the product's store COPYs
        self.copy_sql = f"COPY {FLOOR_TABLE} ({names}) FROM STDIN (FORMAT BINARY)"
        self.row_id = 0

    def run(self, bodies: list[bytes]) -> float:
        """Seconds to store and window `bodies`."""
        from django.db import connection

        now = datetime.now(UTC)
        # The web process's collector settings (config/asgi.py): what it costs here is not
        # storing.
        threshold = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(7000, 10, 10)
        started = time.perf_counter()
        raw = connection.connection
        for body in bodies:
            events = json.loads(body)
            with raw.transaction(), raw.cursor() as cursor, cursor.copy(self.copy_sql) as copy:
                copy.set_types(self.types)
                for event in events:
                    self.row_id += 1
                    # The bench's own times, each with its zone: the least that reading one
                    # costs.
                    moment = datetime.fromisoformat(event["ts"])  # noqa: TID251
                    copy.write_row((self.row_id, event["id"], event["agent"], moment,
                                    event["kind"], event.get("tool", ""),
                                    event.get("resource", ""), event.get("record", ""), "",
                                    "", "", "", "", "api", "", "", "", now, "bench", False))
            pipe = self.redis.pipeline(transaction=False)
            for event in events:
                pipe.zadd(f"floor:{event['agent']}", {event["id"]: now.timestamp()})
            pipe.execute()
        elapsed = time.perf_counter() - started
        gc.set_threshold(*threshold)
        gc.unfreeze()
        return elapsed

    def drop(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE {FLOOR_TABLE}")
        for key in self.redis.scan_iter("floor:*", count=1000):
            self.redis.delete(key)


def bench_token() -> str:
    from django.contrib.auth.models import User

    from registry import actions

    admin, _ = User.objects.get_or_create(username="bench-admin", is_superuser=True)
    return actions.issue_api_token(admin, actor="system:bench")[1]


def main(total: int, web: list[int], agents: int, per_process: int) -> None:
    setup_django()
    from django.db import connection

    build_cluster(agents)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    key = bench_token()
    for count in web:
        processes = WebProcesses(count)
        try:
            processes.wait_ready()
            # Warm up each server and its connections, and every agent's windows: an agent's
            # windows are filled from the database once per longest window (an hour here),
            # the first time its events arrive; steady state is what is measured. Every agent
            # is named (batches of agents drawn at random left ~5% of them unseen, filled
            # and first read into the process's cache during the measured batches).
            warm = [batch(agents, min(BATCH, agents), first) for first in range(0, agents, BATCH)]
            for port in processes.ports:
                send_all([port], key, warm)
            bodies = [batch(agents, BATCH) for _ in range(total // BATCH)]
            # The floor and the product in turns, ROUNDS of each over the same stretch of
            # time: a shared machine's speed swings by a third within minutes, and a floor
            # measured all before the product (or after) caught a different machine.
            floor = Floor()
            events = 0
            seconds = cpu = 0.0
            floor_seconds = 0.0
            stores = {"floor": dict.fromkeys(STORES.values(), 0.0),
                      "product": dict.fromkeys(STORES.values(), 0.0)}
            for start in range(ROUNDS):
                part = bodies[start::ROUNDS]
                before = stores_cpu()
                floor_seconds += floor.run(part)
                between, cpu_before = stores_cpu(), processes.cpu_seconds()
                accepted, took = send_all(processes.ports, key, part, per_process)
                cpu += processes.cpu_seconds() - cpu_before
                after = stores_cpu()
                events, seconds = events + accepted, seconds + took
                for store in STORES.values():
                    stores["floor"][store] += between[store] - before[store]
                    stores["product"][store] += after[store] - between[store]
            floor.drop()
        finally:
            processes.stop()
        floor_rate = len(bodies) * BATCH / floor_seconds
        print(json.dumps({
            "bench": "ingest",
            "database": connection.vendor,
            "agents": agents,
            "events": events,
            "batch": BATCH,
            "web_processes": count,
            "clients": count * per_process,
            "seconds": round(seconds, 3),
            "events_per_second": round(events / seconds),
            "events_per_second_per_process": round(events / seconds / count),
            # The web processes' CPU (user and system) per 1,000-event batch: steadier than
            # the rates on a shared machine, and what a batch costs the product's Python.
            "web_cpu_ms_per_batch": round(cpu / len(bodies) * 1000, 1),
            # The stores' CPU a batch (PostgreSQL's and Redis's processes on this machine):
            # on a machine of two cores, what the web process's CPU competes with.
            "stores_cpu_ms_per_batch": per_batch(stores["product"], len(bodies)),
            "floor_stores_cpu_ms_per_batch": per_batch(stores["floor"], len(bodies)),
            "floor_seconds": round(floor_seconds, 3),
            "floor_events_per_second": round(floor_rate),
            "share_of_floor": round(events / seconds / floor_rate, 3),
            "load_average": round(os.getloadavg()[0], 1),
            "at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        }), flush=True)


def main_group_rules(total: int, per_process: int) -> None:
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
    key = bench_token()
    compliance, _ = User.objects.get_or_create(username="bench-compliance")
    actions.grant_role(compliance, Role.COMPLIANCE, actor="system:bench")
    processes = WebProcesses(1)
    results = {}
    try:
        processes.wait_ready()
        send_all(processes.ports, key, [fleet_batch(10)])  # warm up
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
                send_all(processes.ports, key, [fleet_batch(10)])  # the group windows' fill
            bodies = [fleet_batch(BATCH) for _ in range(total // BATCH)]
            results[phase] = send_all(processes.ports, key, bodies, per_process)
    finally:
        processes.stop()
    per_agent = results["per_agent"][0] / results["per_agent"][1]
    grouped = results["group_rules"][0] / results["group_rules"][1]
    print(json.dumps({
        "bench": "ingest_group_rules",
        "database": connection.vendor,
        "agents": 1000,
        "group_rules": 21,
        "events": results["group_rules"][0],
        "batch": BATCH,
        "clients": per_process,
        "per_agent_events_per_second": round(per_agent),
        "group_rules_events_per_second": round(grouped),
        "slowdown": round(per_agent / grouped, 2),
        "target_slowdown_at_most": 2,
    }))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("events", nargs="?", type=int, default=50_000)
    parser.add_argument("--web", default="1,2,4", help="web-process counts, comma-separated")
    parser.add_argument("--agents", type=int, default=1,
                        help="agents the events are spread across (bench-00000...)")
    parser.add_argument("--group-rules", action="store_true")
    parser.add_argument("--clients", type=int, default=CLIENTS_PER_PROCESS,
                        help="client threads per web process (each sends one batch at a time)")
    args = parser.parse_args()
    if args.clients < 1:
        parser.error("--clients must be at least 1")
    if args.group_rules:
        main_group_rules(args.events, args.clients)
    else:
        main(args.events, [int(n) for n in args.web.split(",")], args.agents, args.clients)
