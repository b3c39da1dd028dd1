"""Probes and Prometheus metrics: /healthz, /readyz, /metrics."""

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from config import queues, redis_capabilities, redis_connection

QUEUE_NAMES = ("reconcile", "ingest", "default")

REQUESTS = Counter(
    "http_requests_total", "HTTP requests served", ["method", "route", "status"]
)
REQUEST_SECONDS = Histogram(
    "http_request_duration_seconds", "Time to serve an HTTP request", ["method", "route"]
)


class RequestMetricsMiddleware:
    """Count and time every request by its URL pattern (not its raw path: bounded labels)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = match.route if match is not None and match.route else "unmatched"
        REQUEST_SECONDS.labels(request.method, route).observe(time.perf_counter() - started)
        REQUESTS.labels(request.method, route, str(response.status_code)).inc()
        return response


class QueueCollector(Collector):
    """Queue depth and failed jobs, read from Redis at scrape time."""

    def describe(self) -> list:
        return []  # registering must not reach Redis

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily("rq_queue_depth", "Jobs waiting in an RQ queue", labels=["queue"])
        failed = GaugeMetricFamily(
            "rq_queue_failed", "Failed jobs kept for a queue", labels=["queue"]
        )
        up = GaugeMetricFamily("redis_up", "1 when Redis answered the scrape")
        try:
            for name in QUEUE_NAMES:
                queue = queues.queue(name)
                depth.add_metric([name], queue.count)
                failed.add_metric([name], queue.failed_job_registry.count)
            up.add_metric([], 1)
        except redis.RedisError:
            up.add_metric([], 0)
            yield up
            return
        yield depth
        yield failed
        yield up


REGISTRY.register(QueueCollector())
# The apps register their own collectors from their AppConfig.ready (reconciliation's passes and
# findings, siem's outbox): config sits below them and names none of them.


def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up and serving."""
    return JsonResponse({"status": "ok"})


def _check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return "ok"
    except Exception as error:  # any driver error means not ready; report it, never 500
        return f"error: {type(error).__name__}: {error}".strip()[:300]


def _check_redis() -> str:
    """"ok" when Redis answers and can run the product (config/redis_capabilities.py)."""
    client = redis_connection.probe()
    try:
        redis_capabilities.check(client)
        return "ok"
    except redis_capabilities.TooOld as error:
        return f"error: {error}"[:300]
    except redis.RedisError as error:
        return f"error: {type(error).__name__}: {error}"[:300]
    finally:
        client.close()


def _audit_signing_refusal() -> str | None:
    """Why the audit signer refuses to sign, while it does (the refusal it keeps beside its
    memory of the last signed head, audit/signer.py): the trail is not being signed."""
    refused = Path(settings.AUDIT_SIGNED_HEAD_FILE + ".refused")
    try:
        found = json.loads(refused.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "refused: (the refusal file is unreadable)"
    return f"refused: {found.get('message', '')}"[:300] if isinstance(found, dict) else "refused"


def readyz(request: HttpRequest) -> JsonResponse:
    """Ready when the database and Redis both answer; 503 naming what failed otherwise.
    `degraded` (still 200: the site serves) while the audit signer refuses to sign."""
    checks = {"database": _check_database(), "redis": _check_redis()}
    ready = all(value == "ok" for value in checks.values())
    status = "ready" if ready else "unavailable"
    refusal = _audit_signing_refusal()
    if refusal is not None:
        checks["audit_signing"] = refusal
        status = "degraded" if ready else status
    return JsonResponse({"status": status, "checks": checks}, status=200 if ready else 503)


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text exposition."""
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
