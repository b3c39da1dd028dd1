"""Verifying the trail stored in the database: chain, head and signed checkpoints."""

from collections.abc import Iterator
from typing import Any

from django.conf import settings

from audit.chain import ChainReport, checkpoint_signature, format_time, verify_entries
from audit.models import AuditChainHead, AuditCheckpoint, AuditEntry

ENTRY_FIELDS = (
    "seq", "at", "actor", "action", "target", "agent",
    "before", "after", "reason", "request_id", "prev_hash", "hash",
)


def fetch_chunk(after_seq: int, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` entries after `after_seq`, in seq order, in their exported form."""
    rows = list(
        AuditEntry.objects.filter(seq__gt=after_seq).order_by("seq").values(*ENTRY_FIELDS)[:limit]
    )
    for row in rows:
        row["at"] = format_time(row["at"])
    return rows


def iter_entries(chunk: int = 5000) -> Iterator[dict[str, Any]]:
    """Every entry in seq order, a chunk at a time, so memory stays flat on any size."""
    after = 0
    while rows := fetch_chunk(after, chunk):
        yield from rows
        after = rows[-1]["seq"]


def verify_trail() -> ChainReport:
    """Walk the whole chain; report ok or the first broken seq and why."""
    key = settings.AUDIT_SIGNING_KEY
    signed: dict[int, str] = {}
    forged: int | None = None
    for checkpoint in AuditCheckpoint.objects.order_by("seq"):
        expected = checkpoint_signature(key, checkpoint.seq, checkpoint.head_hash)
        if checkpoint.signature == expected:
            signed[checkpoint.seq] = checkpoint.head_hash
        elif forged is None:
            forged = checkpoint.seq
    report = verify_entries(iter_entries(), checkpoints=signed)
    report.checkpoints = len(signed)
    if forged is not None and (report.ok or forged < (report.first_broken_seq or 0)):
        report.ok = False
        report.first_broken_seq = forged
        report.problem = f"the checkpoint at entry {forged} has an invalid signature"
    head = AuditChainHead.objects.filter(pk=1).first()
    if report.ok and head is not None and head.seq != report.count:
        report.ok = False
        report.first_broken_seq = report.count + 1
        report.problem = (
            f"the chain ends at entry {report.count} but its head records entry {head.seq}"
        )
    return report
