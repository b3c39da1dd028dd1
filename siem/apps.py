from django.apps import AppConfig


class SiemConfig(AppConfig):
    """The audit and alert stream to SIEM sinks: syslog over TLS, OTLP logs, HTTP batches."""

    name = "siem"
    verbose_name = "SIEM stream"

    def ready(self) -> None:
        from prometheus_client import REGISTRY  # apps.py loads before the models

        from siem import receivers  # noqa: F401  (connects the stream to audit and alerts)
        from siem.metrics import SiemCollector  # apps.py loads before the models

        if not any(isinstance(c, SiemCollector) for c in list(REGISTRY._collector_to_names)):
            REGISTRY.register(SiemCollector())
