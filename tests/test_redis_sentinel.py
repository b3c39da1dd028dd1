"""Redis Sentinel: the work-queue and channel-layer Redis's primary is killed, the Sentinels
promote its replica, and a web process, a worker and websockets carry on: drift found after
the failover is corrected once, a live alert reaches the browser, nothing is applied twice."""

import asyncio
import json
import threading
import urllib.request

import pytest
import redis
import redis.asyncio
from channels_redis.utils import create_pool
from django.conf import settings
from django.db.models import Max
from django.test import Client
from django_rq.connection_utils import get_redis_connection
from websockets.exceptions import ConnectionClosed
from websockets.sync import client as ws_client

from audit.models import AuditEntry
from config.redis_connection import RedisTarget, parse_sentinels
from reconciliation.models import AlertEvent, Correction, Finding, ReconcileRun
from registry import actions
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import (
    BAD_DEPLOYMENT,
    Worker,
    approved_agent,
    eventually,
    start_daphne,
    stop_daphne,
)
from tests.redis_sentinel import MASTER, SentinelCluster


@pytest.fixture
def sentinels():
    cluster = SentinelCluster()
    yield cluster
    cluster.close()


@pytest.fixture
def cluster_on_sentinels(transactional_db, sentinels):
    """A web process and a worker that reach Redis only through the Sentinels."""
    env = {"REDIS_SENTINELS": sentinels.sentinels_setting(), "REDIS_SENTINEL_MASTER": MASTER,
           "REDIS_URL": "redis://sentinel-named/0", "RECONCILE_VERIFY_DELAY_SECONDS": "1",
           "RECONCILE_RESYNC_SECONDS": "3600"}
    web = start_daphne(**env)
    worker = Worker("reconcile", "default", **env)
    yield web, worker
    worker.stop()
    stop_daphne(web)


def alerts_socket(web, user, since: int = 0):
    browser = Client()
    browser.force_login(user)
    session = browser.cookies[settings.SESSION_COOKIE_NAME].value
    return ws_client.connect(f"{web.url.replace('http', 'ws', 1)}/ws/alerts?since={since}",
                             origin=web.url, proxy=None, open_timeout=30,
                             additional_headers={
                                 "Cookie": f"{settings.SESSION_COOKIE_NAME}={session}"})


def corrected(agent) -> bool:
    findings = Finding.objects.filter(agent=agent)
    return findings.count() == 3 and all(f.status == "corrected" for f in findings)


def story(agent, worker) -> str:
    """What the control plane recorded about the agent, in order, and what the worker logged:
    the failure message of every wait and check below."""
    row = SandboxAgent.objects.get(agent=agent)
    lines = [f"sandbox: apply_count={row.apply_count} keys={[k[:8] for k in row.applied_keys]}"]
    lines += [f"finding {f.pointer}: {f.status} occurrence={f.occurrence} attempts={f.attempts}"
              for f in Finding.objects.filter(agent=agent).order_by("pk")]
    lines += [f"correction {c.idempotency_key[:8]} {c.operation.get('path')}: {c.result}"
              f" attempts={c.attempts}" for c in Correction.objects.filter(agent=agent)
              .order_by("pk")]
    lines += [f"run {r.trigger}: {r.result} drift={r.drift_found} changes={len(r.changes)}"
              f" {r.error}" for r in ReconcileRun.objects.filter(agent=agent).order_by("pk")]
    lines += [f"audit {e.action} {e.target}: {e.reason[:120]}"
              for e in AuditEntry.objects.filter(agent=agent.name).order_by("seq")]
    return "\n".join(lines) + f"\nthe worker said:\n{worker.output()[-4000:]}"


def settled(worker, agent, check, what: str) -> None:
    """Wait for `check`; on a time-out, say what happened meanwhile."""
    try:
        eventually(check, timeout=120)
    except AssertionError:
        raise AssertionError(f"{what}:\n{story(agent, worker)}") from None


def reconcile_now(web, key: str, agent) -> int:
    request = urllib.request.Request(f"{web.url}/api/v1/agents/{agent.name}/reconcile",
                                     method="POST", headers={"Authorization": f"Token {key}"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return answer.status


def test_a_failover_is_a_pause_not_an_outage(people, sentinels, cluster_on_sentinels):
    web, worker = cluster_on_sentinels
    agent = approved_agent(people, "sentinel-agent", enforcement={"default": "correct"})
    _, key = actions.issue_api_token(people.alice, actor="system:test")

    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="before the failover")
    assert reconcile_now(web, key, agent) == 202
    settled(worker, agent, lambda: corrected(agent), "not corrected before the failover")
    applied = SandboxAgent.objects.get(agent=agent).apply_count
    assert applied == 3, story(agent, worker)

    old_primary = sentinels.primary_port
    sentinels.kill_primary()
    eventually(lambda: sentinels.current_primary_port() == sentinels.replica_port, timeout=90,
               message="the sentinels did not promote the replica")
    assert sentinels.current_primary_port() != old_primary

    last_alert = AlertEvent.objects.aggregate(last=Max("pk"))["last"]
    socket = alerts_socket(web, people.alice)
    try:
        sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                       reason="after the failover")
        assert reconcile_now(web, key, agent) == 202
        # Verified corrections of the drift's second occurrence: records the pass after the
        # failover writes, none of which the pass before it could have left.
        settled(worker, agent, lambda: corrected(agent)
                and Finding.objects.filter(agent=agent, occurrence=2).count() == 3
                and Correction.objects.filter(agent=agent, result="verified").count() == 6,
                "not corrected after the failover")
        # The alert reaches the browser: live, or, when the web process's channel layer lost
        # its Redis and closed the socket, on reconnecting from the last id seen (as
        # alerts.js does; docs/operating.md), a few times at most.
        event, seen, closings = {}, 0, []
        while not (event.get("event") == "drift.corrected" and event["id"] > last_alert):
            try:
                event = json.loads(socket.recv(timeout=60))
                seen = max(seen, event.get("id") or 0)
            except ConnectionClosed as closed:
                closings.append(str(closed))
                assert len(closings) <= 3, f"the alerts socket kept closing: {closings}"
                socket = alerts_socket(web, people.alice, since=seen)
    finally:
        socket.close()
    # Each of the three changes applied once per drift: nothing lost, nothing done twice.
    assert SandboxAgent.objects.get(agent=agent).apply_count == applied + 3, story(agent, worker)
    assert web.process.poll() is None and worker.process.poll() is None


def test_sentinel_settings_name_the_master_and_keep_the_urls_database():
    target = RedisTarget("redis://:s3cret@ignored/9", parse_sentinels(["10.0.0.1:26379",
                                                                       "[::1]:26380"]), "prod")
    assert target.rq_queue()["SENTINELS"] == [("10.0.0.1", 26379), ("::1", 26380)]
    assert (target.rq_queue()["MASTER_NAME"], target.db, target.password) == ("prod", 9, "s3cret")
    assert target.channel_host(socket_timeout=30)["master_name"] == "prod"
    with pytest.raises(ValueError, match="host:port"):
        parse_sentinels(["10.0.0.1"])


def blocked_in(port: int, command: str) -> bool:
    return any(entry.get("cmd") == command
               for entry in redis.Redis(port=port, socket_timeout=2).client_list())


def test_a_dequeue_waiting_when_the_primary_dies_carries_on_against_the_promoted_replica(
        sentinels):
    """A worker waits for jobs in a blocking pop on the primary. When the primary dies, the pop
    is retried against the primary the sentinels promote (redis-py alone retried it against the
    dead address until it gave up, and the worker quit), and takes the next job there."""
    target = RedisTarget("redis://sentinel-named/3", tuple(
        ("127.0.0.1", port) for port in sentinels.sentinel_ports), MASTER)
    queue = get_redis_connection(target.rq_queue())
    answers = []
    waiter = threading.Thread(target=lambda: answers.append(
        _outcome(lambda: queue.blpop("rq:queue:reconcile", timeout=150))), daemon=True)
    waiter.start()
    eventually(lambda: blocked_in(sentinels.primary_port, "blpop"), timeout=30,
               message="the pop never reached the primary")

    sentinels.kill_primary()
    eventually(lambda: sentinels.current_primary_port() == sentinels.replica_port, timeout=90,
               message="the sentinels did not promote the replica")
    redis.Redis(port=sentinels.replica_port, db=3).rpush("rq:queue:reconcile", "job-1")
    waiter.join(timeout=150)
    assert answers == [(b"rq:queue:reconcile", b"job-1")]


def test_the_channel_layers_wait_carries_on_against_the_promoted_replica(sentinels):
    """The same for the channel layer's connections (redis.asyncio), which wait on the
    primary for every websocket's next message."""
    target = RedisTarget("redis://sentinel-named/4", tuple(
        ("127.0.0.1", port) for port in sentinels.sentinel_ports), MASTER)

    async def wait_then_fail_over():
        layer = redis.asyncio.Redis(connection_pool=create_pool(target.channel_host()))
        try:
            waiting = asyncio.create_task(layer.bzpopmin("asgi:group", timeout=150))
            await asyncio.to_thread(eventually, lambda: blocked_in(sentinels.primary_port,
                                                                   "bzpopmin"), timeout=30)
            await asyncio.to_thread(sentinels.kill_primary)
            await asyncio.to_thread(
                eventually, lambda: sentinels.current_primary_port() == sentinels.replica_port,
                timeout=90)
            redis.Redis(port=sentinels.replica_port, db=4).zadd("asgi:group", {"message": 1})
            return await asyncio.wait_for(waiting, timeout=150)
        finally:
            await layer.aclose()

    assert asyncio.run(wait_then_fail_over()) == (b"asgi:group", b"message", 1.0)


def _outcome(call):
    try:
        return call()
    except Exception as error:  # the test reports what the pop raised, not a thread's trace
        return error
