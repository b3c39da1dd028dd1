from django.apps import AppConfig
from django.db.backends.signals import connection_created


class AuditConfig(AppConfig):
    """The hash-chained, append-only audit trail."""

    name = "audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from config.pooling import refuse_shared_sessions

        # The writer's session-level lock needs a session of its own (config/pooling.py).
        connection_created.connect(refuse_shared_sessions, dispatch_uid="refuse_shared_sessions")
