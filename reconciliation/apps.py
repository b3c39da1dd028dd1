from django.apps import AppConfig

from audit.alert_kinds import AlertKind


class ReconciliationConfig(AppConfig):
    """Observed state, drift, corrections, the reconcile loop and live alerts."""

    name = "reconciliation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from audit import signer
        from reconciliation import retention  # noqa: F401  (registers its start-up check)

        signer.signing_refused.connect(_alert_signing_refused,
                                       dispatch_uid="reconciliation.audit_signing_refused")


def _alert_signing_refused(sender: object, size: int, message: str, **kwargs: object) -> None:
    """The audit signer refused a head (audit/signer.py): a high-severity live alert."""
    from django.db import transaction

    from reconciliation.alerts import broadcast

    with transaction.atomic():
        broadcast(AlertKind.AUDIT_SIGNING_REFUSED, {"severity": "high", "size": size,
                                            "message": message})
