"""Every change to sinks and to the stream's state: sinks (audited), alerts placed in the
stream, and each sink's delivery moving on."""

import re
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from audit.actions import record
from audit.chain import canonical_json, chain_hash
from audit.choices import AuditAction
from audit.models import AuditChainHead
from config.errors import DomainError, NotFound
from siem import receivers_cache
from siem.choices import SinkKind, StartAt, Stream
from siem.models import AlertRecord, AlertStreamHead, PendingAlert, Sink
from siem.transports import check_url

PLACE_BATCH = 1000
TOKEN_ENV = re.compile(r"SIEM_TOKEN_[A-Z0-9_]{1,60}")


class SinkInvalid(DomainError):
    """The sink's configuration cannot be used; nothing was changed."""

    status, code = 400, "invalid_sink"


def _validate(kind: str, url: str, token_env: str) -> None:
    if token_env and not TOKEN_ENV.fullmatch(token_env):
        # Only variables named for the purpose: a sink must not carry another secret away.
        raise SinkInvalid("token_env must be a variable named SIEM_TOKEN_<NAME>")
    if kind not in SinkKind.values:
        raise SinkInvalid(f"kind must be one of {', '.join(SinkKind.values)}")
    try:
        check_url(kind, url)
    except ValueError as error:
        raise SinkInvalid(str(error)) from None


def _head(stream: str) -> int:
    if stream == Stream.AUDIT:
        return AuditChainHead.objects.filter(pk=1).values_list("seq", flat=True).first() or 0
    return AlertStreamHead.objects.filter(pk=1).values_list("seq", flat=True).first() or 0


def _locked(pk: int) -> Sink:
    sink = Sink.objects.select_for_update(no_key=True).filter(pk=pk).first()
    if sink is None:
        raise NotFound(f"No SIEM sink {pk}.")
    return sink


@transaction.atomic
def create_sink(*, actor: Any, name: str, kind: str, url: str, ca_pem: str = "",
                token_env: str = "", enabled: bool = True,
                start: str = StartAt.NOW) -> Sink:
    """A new sink; its stream starts after what is sequenced now, or at the beginning."""
    _validate(kind, url, token_env)
    if Sink.objects.filter(name=name).exists():
        raise SinkInvalid(f"a sink named {name!r} exists")
    now = start == StartAt.NOW
    sink = Sink.objects.create(name=name, kind=kind, url=url, ca_pem=ca_pem,
                               token_env=token_env, enabled=enabled,
                               audit_seq=_head(Stream.AUDIT) if now else 0,
                               alert_seq=_head(Stream.ALERT) if now else 0)
    record(actor=actor, action=AuditAction.SIEM_SINK_CREATED, target=f"sink:{name}",
           after={**sink.to_dict(), "start": start})
    transaction.on_commit(receivers_cache.forget)
    return sink


@transaction.atomic
def update_sink(pk: int, *, actor: Any, **changes: Any) -> Sink:
    """Change a sink's destination, trust, token variable or whether it is enabled; its
    stream goes on from where it was."""
    sink = _locked(pk)
    before = sink.to_dict()
    for field in ("url", "ca_pem", "token_env", "enabled"):
        if field in changes:
            setattr(sink, field, changes[field])
    _validate(sink.kind, sink.url, sink.token_env)
    sink.save()
    record(actor=actor, action=AuditAction.SIEM_SINK_CHANGED, target=f"sink:{sink.name}",
           before=before, after=sink.to_dict())
    transaction.on_commit(receivers_cache.forget)
    return sink


@transaction.atomic
def delete_sink(pk: int, *, actor: Any) -> None:
    """Remove a sink: nothing more is sent to it."""
    sink = _locked(pk)
    record(actor=actor, action=AuditAction.SIEM_SINK_DELETED, target=f"sink:{sink.name}",
           before=sink.to_dict())
    sink.delete()
    transaction.on_commit(receivers_cache.forget)


def queue_alert(body: dict[str, Any]) -> None:
    """In the alert's own transaction: queue it for the stream (so it exists only if the
    alert does)."""
    PendingAlert.objects.create(body=body)


@transaction.atomic
def place_alerts(limit: int = PLACE_BATCH) -> int:
    """Give queued alerts the next seqs and chained hashes, oldest first, in one transaction
    with their removal from the queue: each is placed exactly once."""
    head, _ = AlertStreamHead.objects.select_for_update(no_key=True).get_or_create(pk=1)
    pending = list(PendingAlert.objects.select_for_update(no_key=True).order_by("id")[:limit])
    if not pending:
        return 0
    records, seq, previous = [], head.seq, head.hash
    for row in pending:
        seq += 1
        digest = chain_hash(canonical_json({**row.body, "seq": seq}), previous)
        records.append(AlertRecord(seq=seq, prev_hash=previous, hash=digest, body=row.body))
        previous = digest
    AlertRecord.objects.bulk_create(records)
    PendingAlert.objects.filter(id__in=[row.id for row in pending]).delete()
    head.seq, head.hash = seq, previous
    head.save(update_fields=["seq", "hash"])
    return len(pending)


def advance(sink: Sink, stream: str, last_seq: int) -> None:
    """In the delivering transaction: the sink took the stream up to `last_seq`."""
    field = "audit_seq" if stream == Stream.AUDIT else "alert_seq"
    setattr(sink, field, last_seq)
    sink.delivered_at, sink.failures, sink.failing_since, sink.last_error, sink.retry_at = (
        timezone.now(), 0, None, "", None)
    sink.save(update_fields=[field, "delivered_at", "failures", "failing_since", "last_error",
                             "retry_at"])


def failed(sink: Sink, error: str, retry_in: float) -> None:
    """In the delivering transaction: the sink did not take the batch (it is sent again, not
    before `retry_in` seconds)."""
    sink.failures += 1
    sink.failing_since = sink.failing_since or timezone.now()
    sink.last_error = error[:2000]
    sink.retry_at = timezone.now() + timedelta(seconds=retry_in)
    sink.save(update_fields=["failures", "failing_since", "last_error", "retry_at"])


def prune_alerts() -> int:
    """Drop alert records every sink has taken (all of them when there is no sink)."""
    reached = Sink.objects.aggregate(low=Min("alert_seq"))["low"]
    if reached is None:
        reached = AlertRecord.objects.aggregate(high=Max("seq"))["high"] or 0
    deleted, _ = AlertRecord.objects.filter(seq__lte=reached).delete()
    return deleted
