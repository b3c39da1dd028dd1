from django.apps import AppConfig


class SiemConfig(AppConfig):
    """The audit and alert stream to SIEM sinks: syslog over TLS, OTLP logs, HTTP batches."""

    name = "siem"
    verbose_name = "SIEM stream"

    def ready(self) -> None:
        from siem import registrations  # apps.py loads before the models

        registrations.register()
