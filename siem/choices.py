"""Enumerations of the SIEM stream."""

from django.db import models


class SinkKind(models.TextChoices):
    """How a sink is reached and what it is sent."""

    SYSLOG = "syslog", "Syslog (RFC 5424 over TLS)"
    OTLP = "otlp", "OTLP logs (HTTP/JSON)"
    HTTP = "http", "HTTP JSON batches (Splunk HEC style)"


class Stream(models.TextChoices):
    """The two ordered streams every sink is sent, each with its own sequence."""

    AUDIT = "audit"
    ALERT = "alert"


class StartAt(models.TextChoices):
    """Where a new sink's stream begins."""

    NOW = "now"  # what is sequenced after the sink is created
    BEGINNING = "beginning"  # the whole live trail first
