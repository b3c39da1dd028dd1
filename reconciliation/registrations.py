"""What the loop connects at start-up, from ReconciliationConfig.ready: its metrics, its answers
to the registry's signals (receivers.py; the inbox sweep's here), the agent list's health and
sync filters, its own kinds of connector, the alert for a refused audit signature, and
retention's start-up check (registered on import)."""

from django.db import transaction
from prometheus_client import REGISTRY

from audit import signer
from audit.alert_kinds import AlertKind
from config import queues
from reconciliation import (
    connectors,
    jobs,
    receivers,
    retention,  # noqa: F401  (registers its start-up check)
)
from reconciliation.agent_filters import AgentStateFilterSet
from reconciliation.alerts import broadcast
from reconciliation.connectors.http import HttpConnector
from reconciliation.connectors.push import PushConnector
from reconciliation.metrics import ReconcileCollector
from registry import filters, signals


def register() -> None:
    """Once per process (each connection ignores a repeat: ready may run again in tests)."""
    if not any(isinstance(c, ReconcileCollector) for c in list(REGISTRY._collector_to_names)):
        REGISTRY.register(ReconcileCollector())  # served at /metrics (config/observability.py)
    receivers.connect()  # what the registry announces (registry/signals.py)
    filters.register_agent_filterset(AgentStateFilterSet)  # the agent list's health and sync
    # The loop's own kinds of connector; sandbox registers its own (sandbox/apps.py).
    connectors.register("push", lambda agent: PushConnector())
    connectors.register("http", lambda agent: HttpConnector(
        agent.connector["url"], agent.connector.get("secret_env", "")))
    signer.signing_refused.connect(_alert_signing_refused,
                                   dispatch_uid="reconciliation.audit_signing_refused")
    signals.inbox_item_added.connect(_sweep_inbox, dispatch_uid="reconciliation.sweep_inbox")


def _alert_signing_refused(sender: object, size: int, message: str, **kwargs: object) -> None:
    """The audit signer refused a head (audit/signer.py): a high-severity live alert."""
    with transaction.atomic():
        broadcast(AlertKind.AUDIT_SIGNING_REFUSED, {"severity": "high", "size": size,
                                                    "message": message})


def _sweep_inbox(sender: object, **kwargs: object) -> None:
    """Something new waits in the inbox (registry/signals.py): a sweep after commit tells its
    people now (the inbox and its sweep are the loop's)."""
    transaction.on_commit(lambda: queues.queue("default").enqueue(
        jobs.inbox_sweep))
