"""Liveness, readiness and metrics, as a load balancer and Prometheus see them."""

import pytest

from config import embedded_redis

pytestmark = pytest.mark.django_db


def test_healthz_answers_while_the_process_is_up(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_is_ready_when_database_and_redis_answer(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {"database": "ok", "redis": "ok"}}


def test_readyz_says_redis_failed_when_redis_goes_down(client, settings, tmp_path):
    server = embedded_redis.start_server(tmp_path / "redis")
    settings.REDIS_URL = server.url
    try:
        assert client.get("/readyz").status_code == 200
    finally:
        server.stop()
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["redis"].startswith("error: ConnectionError")


def test_metrics_expose_requests_and_queue_depth(client, redis_client):
    import django_rq

    django_rq.get_queue("reconcile", commit_mode="auto").enqueue("audit.jobs.checkpoint")
    client.get("/healthz")
    text = client.get("/metrics").content.decode()
    assert 'http_requests_total{method="GET",route="healthz",status="200"}' in text
    assert 'rq_queue_depth{queue="reconcile"} 1.0' in text
    assert 'rq_queue_depth{queue="ingest"} 0.0' in text
    assert "redis_up 1.0" in text
