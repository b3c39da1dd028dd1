"""Drift latency end to end, as an agent and a reviewer see it: an agent on the push connector
PUTs an observed state with drift (`PUT /api/v1/agents/{name}/observed-state`, its own
token, over HTTP to a real daphne server) and a signed-in websocket client (session cookie,
this site's Origin) times the `drift.detected` alert; then the agent does what its sidecar
does (pulls the desired state until it lists the corrections, applies it, reports it) and the
client times the `drift.corrected` alerts. Real RQ workers run the passes. Each sample drifts
another agent. Prints one JSON line with p50/p95 of both, beside the floor measured in the
same run, which holds none of the product's own work: the same body PUT with the agent's token
to an API view that only authenticates and answers 405 (its desired state, which takes no PUT:
the same server, middleware and token check) plus one
channel-layer send from this process to the same websocket client. The heartbeat (the agent's
unchanged state PUT to its observed-state endpoint) is printed beside it, not used as the floor.

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
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import Workers, build_cluster  # noqa: E402
from bench.scratch import setup_django  # noqa: E402
from config.embedded_redis import free_port, port_answers  # noqa: E402

WORKERS = 2
TIMEOUT = 60  # seconds to wait for any one alert


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def listen(url: str, cookie: str, origin: str, received: "queue.Queue[tuple[float, dict]]",
           ready: threading.Event, stop: threading.Event) -> None:
    """A websocket client of the real server, timestamping every alert on arrival."""
    import websockets

    async def run() -> None:
        async with websockets.connect(url, additional_headers={
                "Cookie": cookie, "Origin": origin}) as socket:
            ready.set()
            while not stop.is_set():
                try:
                    message = await asyncio.wait_for(socket.recv(), timeout=0.5)
                except TimeoutError:
                    continue
                received.put((time.perf_counter(), json.loads(message)))

    asyncio.run(run())


def call(base: str, key: str, method: str, path: str, body: object = None) -> dict:
    """One API call with an agent's token."""
    request = urllib.request.Request(
        f"{base}{path}", method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"{}")


def wait_for(received: "queue.Queue[tuple[float, dict]]", event: str, agent: str,
             count: int = 1) -> tuple[float, list[dict]]:
    """When the `count`-th `event` alert about `agent` arrived, and those alerts."""
    found: list[dict] = []
    deadline = time.monotonic() + TIMEOUT
    while len(found) < count:
        try:
            at, message = received.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise SystemExit(f"no {event} alert for {agent} within {TIMEOUT} s") from None
        if message.get("event") == event and message.get("agent") == agent:
            found.append(message)
    return at, found


def drifted(state: dict) -> dict:
    """A bad deployment: a CRM tool appears and the $500 refund sign-off is gone."""
    actions = {name: dict(limits) for name, limits in state["actions"].items()}
    actions["payments.refund"].pop("approval_above", None)
    return {**state, "tools": sorted({*state["tools"], "crm.search"}), "actions": actions}


def floor_sample(base: str, key: str, name: str, approved: dict,
                 received: "queue.Queue[tuple[float, dict]]") -> tuple[float, float]:
    """Milliseconds of the physical floor (the agent's body PUT to a view that only answers 405,
    plus one channel-layer send to the websocket client and its arrival), and of a heartbeat
    (the agent's unchanged state PUT to its observed-state endpoint)."""
    from reconciliation.alert_sender import group_send
    from reconciliation.alerts import ALERTS_GROUP

    time.sleep(0.2)  # let the corrected pass's last alerts drain
    while not received.empty():
        received.get()
    started = time.perf_counter()
    try:
        call(base, key, "PUT", f"/api/v1/agents/{name}/desired-state", approved)
    except urllib.error.HTTPError as refused:
        if refused.code != 405:
            raise
    else:
        raise SystemExit("the desired state took a PUT: the floor would hold the product's work")
    put = time.perf_counter() - started
    probe = ""  # a cluster-wide alert: every signed-in reviewer is sent it
    sent = time.perf_counter()
    group_send(ALERTS_GROUP, {"type": "alert.message", "message": {
        "id": 0, "event": "bench.probe", "agent": probe, "severity": "", "owner_id": None}})
    arrived, _ = wait_for(received, "bench.probe", probe)
    started = time.perf_counter()
    call(base, key, "PUT", f"/api/v1/agents/{name}/observed-state", approved)
    heartbeat = time.perf_counter() - started
    return (put + (arrived - sent)) * 1000, heartbeat * 1000


def main(samples: int) -> None:
    # Drifting agent after agent on purpose: the blast-radius breaker would (rightly) pause.
    os.environ["BREAKER_SHARE_PERCENT"] = "100"
    setup_django()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import connection

    from registry import actions as registry_actions
    from registry.models import Agent

    ids = build_cluster(samples, connector="push")
    owner = User.objects.get(username="bench-owner")
    agents = [(agent.name, registry_actions.issue_agent_token(agent, actor=owner)[1])
              for agent in Agent.objects.filter(pk__in=ids).order_by("pk")]
    # The agents' owner watches: an owner is sent alerts about their own agents (a person with
    # no role sees no other owner's).
    viewer = owner
    session = SessionStore()
    session.update({"_auth_user_id": str(viewer.pk),
                    "_auth_user_backend": "django.contrib.auth.backends.ModelBackend",
                    "_auth_user_hash": viewer.get_session_auth_hash()})
    session.create()
    connection.close()  # the server and the workers write from here on
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p",
                               str(port), "config.asgi:application"], cwd=ROOT,
                              env=dict(os.environ), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    workers = Workers(WORKERS, queues=("reconcile", "ingest", "default"))
    received: queue.Queue[tuple[float, dict]] = queue.Queue()
    ready, stop = threading.Event(), threading.Event()
    detected_ms, corrected_ms, floor_ms, heartbeat_ms = [], [], [], []
    try:
        while not port_answers("127.0.0.1", port):
            if server.poll() is not None:
                raise SystemExit("the web server did not start")
            time.sleep(0.1)
        workers.wait_ready()
        cookie = f"{settings.SESSION_COOKIE_NAME}={session.session_key}"
        listener = threading.Thread(target=listen, daemon=True, args=(
            f"ws://127.0.0.1:{port}/ws/alerts", cookie, base, received, ready, stop))
        listener.start()
        if not ready.wait(30):
            raise SystemExit("the websocket client could not connect")
        for name, key in agents:
            desired = call(base, key, "GET", f"/api/v1/agents/{name}/desired-state")
            approved = {**{k: v for k, v in desired["spec"].items() if k != "enforcement"},
                        "running": desired["running"]}
            sent = time.perf_counter()
            call(base, key, "PUT", f"/api/v1/agents/{name}/observed-state", drifted(approved))
            seen_at, first = wait_for(received, "drift.detected", name)
            detected_ms.append((seen_at - sent) * 1000)
            # The rest of this drift's findings were announced in the same commit.
            time.sleep(0.05)
            findings = {first[0]["finding"]}
            while not received.empty():
                _, message = received.get()
                if message.get("event") == "drift.detected" and message.get("agent") == name:
                    findings.add(message["finding"])
            # The sidecar: pull until the corrections are published, apply, report.
            while not call(base, key, "GET",
                           f"/api/v1/agents/{name}/desired-state")["corrections"]:
                if (time.perf_counter() - sent) > TIMEOUT:
                    raise SystemExit(f"no corrections published for {name}")
                time.sleep(0.01)
            call(base, key, "PUT", f"/api/v1/agents/{name}/observed-state", approved)
            fixed_at, _ = wait_for(received, "drift.corrected", name, count=len(findings))
            corrected_ms.append((fixed_at - sent) * 1000)
            floor, heartbeat = floor_sample(base, key, name, approved, received)
            floor_ms.append(floor)
            heartbeat_ms.append(heartbeat)
    finally:
        stop.set()
        workers.stop()
        server.terminate()
        server.wait(timeout=30)
    print(json.dumps({
        "bench": "drift_latency",
        "database": connection.vendor,
        "samples": samples,
        "workers": WORKERS,
        "floor_ms_p50": round(percentile(floor_ms, 0.5), 1),
        "floor_ms_p95": round(percentile(floor_ms, 0.95), 1),
        "heartbeat_put_ms_p50": round(percentile(heartbeat_ms, 0.5), 1),
        "heartbeat_put_ms_p95": round(percentile(heartbeat_ms, 0.95), 1),
        "put_to_detected_alert_ms_p50": round(percentile(detected_ms, 0.5), 1),
        "put_to_detected_alert_ms_p95": round(percentile(detected_ms, 0.95), 1),
        "put_to_detected_alert_ms_mean": round(statistics.mean(detected_ms), 1),
        # Includes the simulated sidecar pulling the correction and reporting it applied.
        "put_to_corrected_alert_ms_p50": round(percentile(corrected_ms, 0.5), 1),
        "put_to_corrected_alert_ms_p95": round(percentile(corrected_ms, 0.95), 1),
        "detected_p95_over_floor_p95": round(percentile(detected_ms, 0.95)
                                             / percentile(floor_ms, 0.95), 2),
    }))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
