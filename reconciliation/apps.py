from django.apps import AppConfig

from audit.alert_kinds import AlertKind


class ReconciliationConfig(AppConfig):
    """Observed state, drift, corrections, the reconcile loop and live alerts."""

    name = "reconciliation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at the top: these modules import models, not loadable before ready.
        from prometheus_client import REGISTRY

        from audit import signer  # apps.py loads before the models
        from reconciliation import (
            receivers,
            retention,  # noqa: F401  (registers its start-up check)
        )
        from reconciliation.metrics import ReconcileCollector  # apps.py loads before the models

        if not any(isinstance(c, ReconcileCollector) for c in list(REGISTRY._collector_to_names)):
            REGISTRY.register(ReconcileCollector())  # served at /metrics (config/observability.py)

        receivers.connect()  # what the registry announces (registry/signals.py)
        _register_connectors()
        signer.signing_refused.connect(_alert_signing_refused,
                                       dispatch_uid="reconciliation.audit_signing_refused")


def _register_connectors() -> None:
    """The loop's own kinds of connector; sandbox registers its own (sandbox/apps.py)."""
    from reconciliation import connectors  # apps.py loads before the models
    from reconciliation.connectors.http import HttpConnector  # apps.py loads before the models
    from reconciliation.connectors.push import PushConnector  # apps.py loads before the models

    connectors.register("push", lambda agent: PushConnector())
    connectors.register("http", lambda agent: HttpConnector(
        agent.connector["url"], agent.connector.get("secret_env", "")))


def _alert_signing_refused(sender: object, size: int, message: str, **kwargs: object) -> None:
    """The audit signer refused a head (audit/signer.py): a high-severity live alert."""
    from django.db import transaction  # apps.py loads before the models

    from reconciliation.alerts import broadcast  # apps.py loads before the models

    with transaction.atomic():
        broadcast(AlertKind.AUDIT_SIGNING_REFUSED, {"severity": "high", "size": size,
                                            "message": message})
