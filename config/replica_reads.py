"""Reads that tolerate a few seconds of lag go to PostgreSQL streaming replicas.

Configured replicas (`DATABASE_REPLICA_URLS`) serve only the GET requests named in
`LAG_TOLERANT_ROUTES`: list pages and list APIs, the dashboard, the fleet view, the audit
explorer and `/metrics`. Everything else reads the primary: writes, every read inside a
transaction, and whatever decides what to enforce now (ingest, decisions, passes, the
resync, the desired state an agent reads). A replica is used only while it is streaming from
the primary and its replay is within `DATABASE_REPLICA_MAX_LAG_SECONDS`; one that lags, stops
streaming or cannot be reached is left alone for a few seconds and the primary answers.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve

log = logging.getLogger(__name__)
PRIMARY = "default"
REPLICA_PREFIX = "replica_"
# URL names (console pages and API routes) whose GETs may read a replica.
LAG_TOLERANT_ROUTES = frozenset({
    "home", "registry-agents", "findings", "escalations", "fleet", "audit-explorer",
    "registry-recertification", "registry-toxic", "registry-guardrails", "group-rules",
    "agent-list", "finding-list", "escalation-list", "proposal-list", "guardrail-list",
    "dashboard", "fleet-api", "audit-list", "audit-entry-list", "audit-checkpoints",
    "metrics",
})
# Seconds of replay behind the primary, or None when the replica is not streaming.
_LAG_SQL = """
SELECT CASE
  WHEN NOT pg_is_in_recovery() THEN NULL
  WHEN NOT EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming') THEN NULL
  WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
  ELSE EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())
END
"""
CHECK_EVERY_SECONDS = 1.0
# Only the product's own records are read from a replica; who is signed in, which token is
# valid and which roles a person holds are always read on the primary, so a revocation or a
# sign-out takes effect at once and a new session is never "not found" for the lag.
REPLICA_APPS = frozenset({"registry", "reconciliation", "audit"})
PRIMARY_ONLY_MODELS = frozenset({
    "registry.apitoken", "registry.connectorsecretgrant", "registry.singlesignonidentity",
    "audit.auditkey", "audit.auditchainhead", "audit.auditpendingentry",
})

_tolerates_lag: contextvars.ContextVar[bool] = contextvars.ContextVar("tolerates_lag",
                                                                      default=False)
_health: dict[str, tuple[float, bool]] = {}  # alias -> (checked at, usable)


def replica_aliases() -> list[str]:
    return [alias for alias in settings.DATABASES if alias.startswith(REPLICA_PREFIX)]


def replica_lag(alias: str) -> float | None:
    """The replica's replay lag in seconds; None when it is not a streaming replica."""
    with connections[alias].cursor() as cursor:
        cursor.execute(_LAG_SQL)
        (lag,) = cursor.fetchone()
    return None if lag is None else float(lag)


def _usable(alias: str, now: float) -> bool:
    checked, usable = _health.get(alias, (float("-inf"), False))
    if now - checked < CHECK_EVERY_SECONDS:
        return usable
    try:
        lag = replica_lag(alias)
        usable = lag is not None and lag <= settings.DATABASE_REPLICA_MAX_LAG_SECONDS
        if not usable:
            log.info("replica %s is not used: lag %s", alias, lag)
    except DatabaseError as error:
        log.warning("replica %s is not used: %s", alias, error)
        connections[alias].close()
        usable = False
    _health[alias] = (now, usable)
    return usable


def forget_health() -> None:
    """Check every replica again on the next read (tests, and after a failover)."""
    _health.clear()


class ReplicaRouter:
    """Route lag-tolerant reads to a healthy replica; everything else to the primary."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        if (not _tolerates_lag.get() or connections[PRIMARY].in_atomic_block
                or model._meta.app_label not in REPLICA_APPS
                or model._meta.label_lower in PRIMARY_ONLY_MODELS):
            return None
        now = time.monotonic()
        return next((alias for alias in replica_aliases() if _usable(alias, now)), None)

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return PRIMARY

    def allow_relation(self, first: Any, second: Any, **hints: Any) -> bool:
        return True  # the replicas hold the primary's rows

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == PRIMARY


class ReplicaReadsMiddleware:
    """Marks a GET of a lag-tolerant route so its reads may go to a replica."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.enabled = bool(replica_aliases())

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not self.enabled or request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        try:
            tolerant = resolve(request.path_info).url_name in LAG_TOLERANT_ROUTES
        except Resolver404:
            tolerant = False
        token = _tolerates_lag.set(tolerant)
        try:
            return self.get_response(request)
        finally:
            _tolerates_lag.reset(token)
