"""Time from a drift landing on a sandbox agent (a "bad deployment", which queues a pass the
way an observed-state PUT does) to (a) the correction verified by the loop and (b) the
drift.corrected alert received by a websocket client of a real daphne server, on 2 real
workers. Prints one JSON line with p50/p95.

Usage: python bench/drift_latency.py [SAMPLES]   (scratch stores: see bench/scratch.py)
"""

import asyncio
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import Workers, build_cluster  # noqa: E402
from bench.scratch import setup_django  # noqa: E402
from config.embedded_redis import free_port, port_answers  # noqa: E402

DRIFT = {"tools": ["crm.search", "orders.lookup", "payments.refund"],
         "actions": {"payments.refund": {"max": 5000}}}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def listen(url: str, cookie: str, received: "queue.Queue[tuple[float, dict]]",
           ready: threading.Event, stop: threading.Event) -> None:
    """A websocket client of the real server, timestamping every alert on arrival."""
    import websockets

    async def run() -> None:
        async with websockets.connect(url, additional_headers={
                "Cookie": cookie, "Origin": "http://127.0.0.1"}) as socket:
            ready.set()
            while not stop.is_set():
                try:
                    message = await asyncio.wait_for(socket.recv(), timeout=0.5)
                except TimeoutError:
                    continue
                received.put((time.time(), json.loads(message)))

    asyncio.run(run())


def main(samples: int) -> None:
    # Drifting agent after agent on purpose: the blast-radius breaker would (rightly) pause.
    os.environ["BREAKER_SHARE_PERCENT"] = "100"
    setup_django()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import connection
    from django.utils import timezone

    from reconciliation import actions
    from reconciliation.models import Finding
    from registry.models import Agent

    ids = build_cluster(samples)
    viewer, _ = User.objects.get_or_create(username="bench-viewer")
    session = SessionStore()
    session["_auth_user_id"] = str(viewer.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = viewer.get_session_auth_hash()
    session.create()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p",
                               str(port), "config.asgi:application"], cwd=ROOT,
                              env=dict(os.environ), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    workers = Workers(2)
    received: queue.Queue[tuple[float, dict]] = queue.Queue()
    ready, stop = threading.Event(), threading.Event()
    verified, alerted = [], []
    try:
        while not port_answers("127.0.0.1", port):
            time.sleep(0.1)
        workers.wait_ready()
        cookie = f"{settings.SESSION_COOKIE_NAME}={session.session_key}"
        listener = threading.Thread(target=listen, daemon=True, args=(
            f"ws://127.0.0.1:{port}/ws/alerts", cookie, received, ready, stop))
        listener.start()
        if not ready.wait(30):
            raise SystemExit("the websocket client could not connect")
        for agent_id in ids:
            agent = Agent.objects.get(pk=agent_id)
            injected = timezone.now()
            actions.sandbox_deploy(agent, actor="system:bench", changes=DRIFT, reason="bench")
            corrected: set[str] = set()
            deadline = time.monotonic() + 60
            while len(corrected) < 2:
                try:
                    at, message = received.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise SystemExit(f"no drift.corrected alerts for {agent.name}") from None
                if message.get("event") == "drift.corrected" and message.get("agent") == (
                        agent.name):
                    corrected.add(message.get("kind"))
            alerted.append((at - injected.timestamp()) * 1000)
            done = max(f.corrected_at for f in Finding.objects.filter(agent=agent))
            verified.append((done - injected).total_seconds() * 1000)
    finally:
        stop.set()
        workers.stop()
        server.terminate()
        server.wait(timeout=30)
    print(json.dumps({
        "bench": "drift_latency",
        "database": connection.vendor,
        "samples": samples,
        "workers": 2,
        "drift_to_verified_ms_p50": round(percentile(verified, 0.5), 1),
        "drift_to_verified_ms_p95": round(percentile(verified, 0.95), 1),
        "drift_to_websocket_alert_ms_p50": round(percentile(alerted, 0.5), 1),
        "drift_to_websocket_alert_ms_p95": round(percentile(alerted, 0.95), 1),
        "drift_to_websocket_alert_ms_mean": round(statistics.mean(alerted), 1),
    }))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
