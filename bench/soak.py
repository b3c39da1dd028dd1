"""Soak: for a bounded time, 1,000 agents report observations and events at a steady rate
while 20 websocket clients listen and the drift lab injects drift and faults. At the end it
prints events accepted, alerts delivered, drift corrected and verified, and the counts of
anything lost or duplicated, which must be zero. One JSON line.

Usage: python bench/soak.py [SECONDS] [AGENTS]   (scratch stores: see bench/scratch.py)
"""

import asyncio
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

from bench.cluster import Workers, build_cluster  # noqa: E402
from bench.scratch import setup_django  # noqa: E402
from config.embedded_redis import free_port, port_answers  # noqa: E402

LISTENERS = 20


def listener(url: str, cookie: str, seen: list[int], ready: threading.Event,
             stop: threading.Event) -> None:
    """A websocket client that records the id of every alert it receives (reconnecting with
    the last id it saw, as the browser does)."""
    import websockets

    async def run() -> None:
        last = ""
        while not stop.is_set():
            query = f"?since={last}" if last else ""
            try:
                async with websockets.connect(url + query, additional_headers={
                        "Cookie": cookie, "Origin": "http://127.0.0.1"}) as socket:
                    ready.set()
                    while not stop.is_set():
                        try:
                            raw = await asyncio.wait_for(socket.recv(), timeout=0.5)
                        except TimeoutError:
                            continue
                        alert_id = json.loads(raw)["id"]
                        seen.append(alert_id)
                        last = str(alert_id)
            except (OSError, websockets.ConnectionClosed):
                await asyncio.sleep(0.5)

    asyncio.run(run())


def post(base: str, key: str, path: str, body: object, method: str = "POST") -> dict:
    request = urllib.request.Request(f"{base}{path}", data=json.dumps(body).encode(),
                                     method=method, headers={
                                         "Authorization": f"Token {key}",
                                         "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"{}")


def main(seconds: int, count: int) -> None:
    os.environ["BREAKER_SHARE_PERCENT"] = "50"
    os.environ["RECONCILE_RESYNC_SECONDS"] = "10"  # the backstop finishes crashed passes
    # The listeners are one person's tabs; leave room above them for reconnects.
    os.environ["WS_MAX_CONNECTIONS_PER_USER"] = str(LISTENERS * 2)
    setup_django()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore

    from audit.verify import verify_trail
    from reconciliation.models import AlertEvent, Correction, Finding
    from registry import actions
    from registry.models import Agent
    from runtime.models import BehaviourEvent
    from sandbox.lab import inject
    from sandbox.models import SandboxAgent

    ids = build_cluster(count)
    names = list(Agent.objects.filter(pk__in=ids).values_list("name", flat=True))
    admin = User.objects.create_superuser("soak-admin", password=None)
    _, key = actions.issue_api_token(admin, actor="system:soak")
    session = SessionStore()
    session.update({"_auth_user_id": str(admin.pk),
                    "_auth_user_backend": "django.contrib.auth.backends.ModelBackend",
                    "_auth_user_hash": admin.get_session_auth_hash()})
    session.create()
    cookie = f"{settings.SESSION_COOKIE_NAME}={session.session_key}"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p",
                               str(port), "config.asgi:application"], cwd=ROOT,
                              env=dict(os.environ), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    workers = Workers(2, queues=("reconcile", "ingest", "default"))
    cron = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "cron"],
                            cwd=ROOT, env=dict(os.environ), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    stop = threading.Event()
    seen: list[list[int]] = [[] for _ in range(LISTENERS)]
    accepted, duplicates, errors = [0], [0], []
    injected: list[str] = []
    rng = random.Random(11)
    try:
        while not port_answers("127.0.0.1", port):
            time.sleep(0.1)
        workers.wait_ready()
        readies = []
        for index in range(LISTENERS):
            ready = threading.Event()
            readies.append(ready)
            threading.Thread(target=listener, daemon=True, args=(
                f"ws://127.0.0.1:{port}/ws/alerts", cookie, seen[index], ready, stop)).start()
        for ready in readies:
            ready.wait(30)

        def report() -> None:
            while not stop.is_set():
                now = datetime.now(UTC).isoformat()
                batch = [{"id": uuid.uuid4().hex, "agent": rng.choice(names), "ts": now,
                          "kind": "tool_call", "tool": "orders.lookup",
                          "resource": "orders_db", "record": f"o-{rng.randrange(10**6)}"}
                         for _ in range(200)]
                try:
                    answer = post(base, key, "/api/v1/events", batch)
                    accepted[0] += answer["accepted"]
                    again = post(base, key, "/api/v1/events", batch[:20])  # a retried batch
                    duplicates[0] += again["duplicates"]
                    post(base, key, f"/api/v1/agents/{rng.choice(names)}/observed-state",
                         {"running": True}, method="PUT")
                except OSError as error:
                    errors.append(str(error))
                time.sleep(0.1)

        reporters = [threading.Thread(target=report, daemon=True) for _ in range(2)]
        for thread in reporters:
            thread.start()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            agent = Agent.objects.select_related("active_version").get(
                name=rng.choice(names))
            what = rng.choice(["drift", "drift", "crash", "lag"])
            try:
                inject(agent, what, actor="system:soak", after_changes=1, lag_seconds=3)
                injected.append(agent.name)
            except Exception as error:  # record and go on: the soak reports every error
                errors.append(f"lab: {error}")
            time.sleep(2)
        stop.set()
        for thread in reporters:
            thread.join(30)
        drained = time.monotonic() + 120
        while time.monotonic() < drained and Finding.objects.exclude(
                status__in=("corrected", "resolved")).exists():
            time.sleep(1)
        time.sleep(2)  # last alerts in flight
    finally:
        stop.set()
        workers.stop()
        cron.terminate()
        server.terminate()
        server.wait(timeout=30)
    expected = set(AlertEvent.objects.values_list("pk", flat=True))
    lost_alerts = sum(len(expected - set(ids)) for ids in seen)
    duplicated_alerts = sum(len(ids) - len(set(ids)) for ids in seen)
    stored = BehaviourEvent.objects.count()
    applied = SandboxAgent.objects.filter(agent__name__in=set(injected)).values_list(
        "apply_count", flat=True)
    keys = Correction.objects.filter(agent__name__in=set(injected),
                                     result__in=("applied", "verified")).count()
    unverified = Finding.objects.exclude(status__in=("corrected", "resolved")).count()
    report = verify_trail()
    print(json.dumps({
        "bench": "soak", "seconds": seconds, "agents": count, "listeners": LISTENERS,
        "events_accepted": accepted[0], "events_stored": stored,
        "events_lost": accepted[0] - stored, "retried_events_counted_as_duplicates":
            duplicates[0],
        "drift_injected": len(injected),
        "findings_corrected": Finding.objects.filter(status="corrected").count(),
        "findings_not_verified": unverified,
        "changes_applied_on_platform": sum(applied), "correction_keys_applied": keys,
        "changes_applied_twice": max(0, sum(applied) - keys),
        "alerts": len(expected), "alerts_delivered": sum(len(set(i)) for i in seen),
        "alerts_lost": lost_alerts, "alerts_duplicated": duplicated_alerts,
        "errors": len(errors), "audit_ok": report.ok, "audit_entries": report.count,
    }))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60,
         int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
