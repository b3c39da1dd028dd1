"""Appending to the audit trail and signing checkpoints of its head."""

import json
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.chain import GENESIS_HASH, canonical_json, checkpoint_signature, entry_hash, format_time
from audit.choices import AuditAction
from audit.context import current_request_id
from audit.models import AuditChainHead, AuditCheckpoint, AuditEntry


def actor_label(actor: Any) -> str:
    """How a principal is named in the trail: a username, agent:<name>, or system:<part>."""
    if isinstance(actor, str):
        return actor
    label = getattr(actor, "audit_label", None)
    if label:
        return str(label)
    username = getattr(actor, "get_username", None)
    if callable(username) and getattr(actor, "is_authenticated", False):
        return str(username())
    return "anonymous"


def _json_safe(value: Any) -> Any:
    """The value as it will read back from a JSON column, so the hash survives the round trip."""
    return None if value is None else json.loads(canonical_json(value))


def _lock_head() -> AuditChainHead:
    head = AuditChainHead.objects.select_for_update().filter(pk=1).first()
    if head is None:
        AuditChainHead.objects.get_or_create(pk=1, defaults={"seq": 0, "hash": GENESIS_HASH})
        head = AuditChainHead.objects.select_for_update().get(pk=1)
    return head


@transaction.atomic
def record(
    *,
    actor: Any,
    action: AuditAction | str,
    target: str,
    agent: str = "",
    before: Any = None,
    after: Any = None,
    reason: str = "",
    request_id: str | None = None,
) -> AuditEntry:
    """Append one entry to the chain inside the caller's transaction.

    The head row stays locked until the caller commits, so entries appear in commit order and
    two writers can never both link to the same predecessor.
    """
    action = AuditAction(action)
    head = _lock_head()
    fields = {
        "seq": head.seq + 1,
        "at": timezone.now(),
        "actor": actor_label(actor)[:200],
        "action": action.value,
        "target": str(target)[:255],
        "agent": agent or "",
        "before": _json_safe(before),
        "after": _json_safe(after),
        "reason": reason or "",
        "request_id": (request_id if request_id is not None else current_request_id())[:64],
        "prev_hash": head.hash,
    }
    digest = entry_hash({**fields, "at": format_time(fields["at"])})
    entry = AuditEntry(**fields, hash=digest)
    entry.save()
    head.seq, head.hash = entry.seq, digest
    head.save(update_fields=["seq", "hash"])
    if entry.seq % settings.AUDIT_CHECKPOINT_EVERY == 0:
        _sign(entry.seq, digest)
    return entry


def _sign(seq: int, head_hash: str) -> AuditCheckpoint:
    checkpoint = AuditCheckpoint(
        seq=seq,
        head_hash=head_hash,
        at=timezone.now(),
        signature=checkpoint_signature(settings.AUDIT_SIGNING_KEY, seq, head_hash),
    )
    checkpoint.save()
    return checkpoint


@transaction.atomic
def checkpoint_head() -> AuditCheckpoint | None:
    """Sign the current head unless it is already signed (the periodic checkpoint)."""
    head = _lock_head()
    if head.seq == 0 or AuditCheckpoint.objects.filter(seq=head.seq).exists():
        return None
    return _sign(head.seq, head.hash)
