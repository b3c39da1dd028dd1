"""Faults: Redis down (the site stays up, says so, stores what it is sent and catches up when
Redis is back), and the audit trail whole at the end of each."""

import os
import uuid
from datetime import UTC, datetime

import django_rq
import pytest
from rest_framework.test import APIClient
from rq import SimpleWorker

from config import embedded_redis
from reconciliation.models import Finding, ObservedState
from registry import actions as registry_actions
from runtime.actions.behaviour import recount_events
from runtime.models import BehaviourEvent, UncountedBatch
from tests.conftest import approved_with_client, assert_trail_whole

pytestmark = pytest.mark.django_db(transaction=True)


def limited_agent(people):
    return approved_with_client(
        people, data=[{"resource": "customers_db", "access": "read"}],
        limits=[{"resource": "customers_db", "max_same_record": 2, "per": "1h"}],
        enforcement={"default": "correct", "behaviour": "log"})


def reads(count: int) -> list[dict]:
    now = datetime.now(UTC).isoformat()
    return [{"id": uuid.uuid4().hex, "agent": "refund-agent", "ts": now, "kind": "data_access",
             "resource": "customers_db", "record": "c-1"} for _ in range(count)]


def point_redis_at(settings, url: str) -> None:
    settings.REDIS_URL = url
    settings.RQ_QUEUES = {name: {"URL": url, "DEFAULT_TIMEOUT": 300}
                          for name in ("reconcile", "ingest", "default")}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [url]}}}


def test_with_redis_down_the_site_stays_up_stores_everything_and_catches_up(
        people, settings, client, redis_client):
    agent, agent_client = limited_agent(people)
    working = settings.REDIS_URL
    dead = f"redis://127.0.0.1:{embedded_redis.free_port()}/0"
    point_redis_at(settings, dead)

    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["checks"]["database"] == "ok"
    observed = agent_client.put("/api/v1/agents/refund-agent/observed-state",
                                {"tools": ["crm.search"], "running": True}, format="json")
    assert observed.status_code == 202
    assert ObservedState.objects.filter(agent=agent).count() == 1
    sent = agent_client.post("/api/v1/events", reads(4), format="json")
    assert sent.status_code == 200
    assert sent.json()["accepted"] == 4 and sent.json()["rules"].startswith("pending")
    assert BehaviourEvent.objects.count() == 4
    assert [len(batch.events) for batch in UncountedBatch.objects.all()] == [4]
    decision = agent_client.post("/api/v1/agents/refund-agent/decisions",
                                 {"resource": "customers_db", "record": "c-1"}, format="json")
    assert decision.status_code == 201 and decision.json()["outcome"] == "deny"
    assert "fail closed" in decision.json()["rule"]
    manual = APIClient()
    manual.force_authenticate(people.alice)
    queued = manual.post("/api/v1/agents/refund-agent/reconcile")
    assert queued.status_code == 503 and queued.json()["error"]["code"] == "unavailable"

    point_redis_at(settings, working)  # Redis is back: the outbox drains
    assert recount_events() == 4
    assert recount_events() == 0  # each event once
    assert redis_client.zcard(f"bw:{agent.pk}:customers_db:record:c-1:3600") == 4
    queue = django_rq.get_queue("ingest")
    SimpleWorker([queue], connection=queue.connection).work(burst=True)
    finding = Finding.objects.get(agent=agent, kind="same_record_exceeded")
    assert finding.actual == 4 and finding.status == "logged"
    assert not UncountedBatch.objects.exists()
    assert_trail_whole()


@pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith("postgres"),
                    reason="a PostgreSQL server restart; CI runs the suite on PostgreSQL")
def test_database_connections_lost_under_a_running_server_recover_without_a_restart(
        people, transactional_db):
    """What a PostgreSQL restart does to the web process: every connection it holds dies.
    Requests fail cleanly (or reconnect) and the process serves again, unrestarted."""
    from tests.conftest import start_daphne, stop_daphne

    # the web process names its connections, so only its own die (not the test's, nor those
    # of threads the test process keeps, which a later test would find dead)
    live_server_process = start_daphne(PGAPPNAME="agentgov-faults-web")
    try:
        _check_connections_recover(people, live_server_process)
    finally:
        stop_daphne(live_server_process)


def _check_connections_recover(people, live_server_process) -> None:
    import urllib.error
    import urllib.request

    from django.db import connection

    _, key = registry_actions.issue_api_token(people.dana, actor=people.dana)

    def get(path: str) -> int:
        request = urllib.request.Request(f"{live_server_process.url}{path}",
                                         headers={"Authorization": f"Token {key}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    assert get("/api/v1/audit/verify") == 200
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                       "AND application_name = 'agentgov-faults-web'")
        assert cursor.fetchone()[0] >= 1  # the web process held a connection, and lost it
    statuses = [get("/api/v1/audit/verify") for _ in range(3)]
    assert all(status in (200, 500, 503) for status in statuses)
    assert statuses[-1] == 200  # reconnected, same process
    assert get("/readyz") == 200
    assert live_server_process.process.poll() is None
    assert_trail_whole()  # no entry lost or half-written when the connections died
