"""Verifying the trail stored in the database: chain, head and signed checkpoints."""

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db.models import Max

from audit.chain import ChainReport, checkpoint_signature, format_time, verify_entries
from audit.models import AuditChainHead, AuditCheckpoint, AuditEntry

ENTRY_FIELDS = (
    "seq", "at", "actor", "action", "target", "agent",
    "before", "after", "reason", "request_id", "prev_hash", "hash",
)


def fetch_chunk(after_seq: int, limit: int, upto: int | None = None) -> list[dict[str, Any]]:
    """Up to `limit` entries after `after_seq` (and at most `upto`), in seq order, in their
    exported form."""
    entries = AuditEntry.objects.filter(seq__gt=after_seq)
    if upto is not None:
        entries = entries.filter(seq__lte=upto)
    rows = list(entries.order_by("seq").values(*ENTRY_FIELDS)[:limit])
    for row in rows:
        row["at"] = format_time(row["at"])
    return rows


def iter_entries(chunk: int = 5000, upto: int | None = None) -> Iterator[dict[str, Any]]:
    """Every entry (up to seq `upto`) in seq order, a chunk at a time, so memory stays flat on
    any size."""
    after = 0
    while rows := fetch_chunk(after, chunk, upto):
        yield from rows
        after = rows[-1]["seq"]


def verify_trail() -> ChainReport:
    """Walk the whole chain; report ok or the first broken seq and why.

    The head is read first and the walk ends there, so entries other processes append while
    it runs are left for the next verification instead of looking like a break.
    """
    head = AuditChainHead.objects.filter(pk=1).first()
    end = head.seq if head is not None else None
    key = settings.AUDIT_SIGNING_KEY
    signed: dict[int, str] = {}
    forged: int | None = None
    checkpoints = AuditCheckpoint.objects.order_by("seq")
    if end is not None:
        checkpoints = checkpoints.filter(seq__lte=end)
    for checkpoint in checkpoints:
        expected = checkpoint_signature(key, checkpoint.seq, checkpoint.head_hash)
        if checkpoint.signature == expected:
            signed[checkpoint.seq] = checkpoint.head_hash
        elif forged is None:
            forged = checkpoint.seq
    report = verify_entries(iter_entries(upto=end), checkpoints=signed)
    report.checkpoints = len(signed)
    if forged is not None and (report.ok or forged < (report.first_broken_seq or 0)):
        _broken(report, forged, f"the checkpoint at entry {forged} has an invalid signature")
    if report.ok and head is not None:
        if head.seq != report.count:
            _broken(report, report.count + 1, f"the chain ends at entry {report.count} but its "
                                              f"head records entry {head.seq}")
        elif head.hash != report.head_hash:
            _broken(report, head.seq, f"entry {head.seq} is not the head the chain records")
    if report.ok:
        _check_nothing_beyond_the_head(report)
    return report


def _broken(report: ChainReport, seq: int, problem: str) -> None:
    report.ok, report.first_broken_seq, report.problem = False, seq, problem


def _check_nothing_beyond_the_head(report: ChainReport) -> None:
    """Rows past the head were slipped in without it. The newest row is read before the head:
    a row committed in between is committed with its head, so it never counts as beyond."""
    newest = AuditEntry.objects.aggregate(seq=Max("seq"))["seq"] or 0
    head = AuditChainHead.objects.filter(pk=1).values_list("seq", flat=True).first() or 0
    if newest > head:
        _broken(report, head + 1, f"entry {head + 1} lies beyond the head of the chain")
