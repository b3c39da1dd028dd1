"""Sinks and the alert stream. The audit stream needs no outbox of its own: the audit log is
append-only with contiguous seqs committed in order, so each sink's outbox is its cursor over
it. Alerts are not sequenced where they are written (their ids are taken at insert, not at
commit), so they queue here and take contiguous seqs and chained hashes of their own."""

from typing import Any

from django.db import models
from django.utils import timezone

from audit.models import AuditChainHead
from siem.choices import SinkKind, Stream


class Sink(models.Model):
    """One configured destination, with where each stream's delivery has reached."""

    name = models.SlugField(max_length=63, unique=True)
    kind = models.CharField(max_length=8, choices=SinkKind.choices)
    # syslog: syslog+tls://host:port; otlp: the collector's base URL (…/v1/logs is added);
    # http: the full collector URL.
    url = models.CharField(max_length=500)
    # PEM certificates to trust for TLS (empty: the system's trust store).
    ca_pem = models.TextField(blank=True, default="")
    # The environment variable holding the token sent as `Authorization: Splunk <token>` (http).
    token_env = models.CharField(max_length=100, blank=True, default="")
    enabled = models.BooleanField(default=True)
    audit_seq = models.BigIntegerField(default=0)  # the last audit seq the sink accepted
    alert_seq = models.BigIntegerField(default=0)  # the last alert seq the sink accepted
    delivered_at = models.DateTimeField(null=True, blank=True)
    failures = models.PositiveIntegerField(default=0)  # failed runs in a row
    failing_since = models.DateTimeField(null=True, blank=True)
    retry_at = models.DateTimeField(null=True, blank=True)  # after a failed run, not before
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.kind} sink {self.name}"

    def cursor(self, stream: str) -> int:
        return self.audit_seq if stream == Stream.AUDIT else self.alert_seq

    def to_dict(self) -> dict[str, Any]:
        """The sink's configuration as audited (no secrets: the token stays in the env)."""
        return {"name": self.name, "kind": self.kind, "url": self.url,
                "ca_pem": bool(self.ca_pem), "token_env": self.token_env,
                "enabled": self.enabled}


    def status(self, heads: dict[str, int]) -> dict[str, Any]:
        """The configuration with where delivery stands: per stream, the last seq taken and
        how many sequenced records wait (`heads`: each stream's last seq)."""
        streams = {stream: {"delivered_seq": self.cursor(stream),
                            "lag": max(0, head - self.cursor(stream))}
                   for stream, head in heads.items()}
        return {"id": self.pk, **self.to_dict(), "streams": streams,
                "delivered_at": self.delivered_at.isoformat() if self.delivered_at else None,
                "failures": self.failures,
                "failing_since": self.failing_since.isoformat() if self.failing_since else None,
                "retry_at": self.retry_at.isoformat() if self.retry_at else None,
                "last_error": self.last_error}


class PendingAlert(models.Model):
    """An alert recorded in its change's transaction, waiting for its place in the stream."""

    id = models.BigAutoField(primary_key=True)
    body = models.JSONField()

    def __str__(self) -> str:
        return f"pending alert {self.pk}"


class AlertStreamHead(models.Model):
    """The alert stream's last seq and hash; locked by whoever places alerts."""

    seq = models.BigIntegerField(default=0)
    hash = models.CharField(max_length=64, default="0" * 64)

    def __str__(self) -> str:
        return f"alert stream head #{self.seq}"


class AlertRecord(models.Model):
    """An alert in the stream: a contiguous seq and a hash chained to the one before."""

    seq = models.BigIntegerField(primary_key=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)
    body = models.JSONField()

    class Meta:
        ordering = ["seq"]

    def __str__(self) -> str:
        return f"alert record #{self.seq}"


def stream_heads() -> dict[str, int]:
    """Each stream's last seq (the audit log's head; the alert stream's)."""
    def seq(model: type) -> int:
        return model.objects.filter(pk=1).values_list("seq", flat=True).first() or 0

    return {Stream.AUDIT.value: seq(AuditChainHead), Stream.ALERT.value: seq(AlertStreamHead)}
