"""Ingest throughput: behaviour events per second through POST /api/v1/events on a real daphne
server (bulk insert, sliding windows in Redis), 1,000-event batches from 2 client threads.
Prints one JSON line.

Usage: python bench/ingest.py [EVENTS]   (scratch stores: see bench/scratch.py)
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
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50_000)
