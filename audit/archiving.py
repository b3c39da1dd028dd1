"""Archiving an old prefix of the trail (`manage.py audit archive`): which entries may go and
the boundary the live trail is verified from afterwards. The file they go to is an export
(audit/export.py, `write_archive_file`); the state changes (the boundary record, its entry,
deleting the rows) are in audit/actions.py."""

from datetime import datetime
from typing import Any

from django.db.models import Min

from audit import tree
from audit.choices import SignatureAlgorithm
from audit.models import AuditArchive, AuditCheckpoint, AuditEntry


def newest() -> AuditArchive | None:
    """The boundary: the newest archive, after whose last entry the live trail starts."""
    return AuditArchive.objects.order_by("-last_seq").first()


def holding(start: datetime | None) -> AuditArchive | None:
    """The archive holding entries of a period from `start` (None: from the beginning), if
    any: such a period can no longer be proven from the live trail."""
    archives = AuditArchive.objects.order_by("last_seq")
    if start is None:
        return archives.first()
    return archives.filter(last_at__gte=start).first()


def frontier(size: int) -> list[list[Any]]:
    """The stored Merkle frontier at `size` as [level, hex hash] pairs, largest subtree first:
    with the chain hash of entry `size` it is all a walk needs to go on from entry size + 1."""
    nodes = tree.load(tree.frontier_nodes(size))
    return [[level, nodes[(level, index)].hex()] for level, index in tree.frontier_nodes(size)]


def boundary_of(archive: AuditArchive) -> dict[str, Any]:
    """The header's `boundary`: where a file continuing after `archive` starts."""
    return {"size": archive.last_seq, "hash": archive.last_hash,
            "frontier": frontier(archive.last_seq)}


def archivable_size(before: datetime, after_seq: int) -> int | None:
    """The newest signed (Ed25519) checkpoint past `after_seq` whose entries all happened
    before `before`; None when there is none. Entries not yet sequenced are not in the log yet,
    so they never count (and never go)."""
    late = AuditEntry.objects.filter(seq__gt=after_seq, at__gte=before).aggregate(
        seq=Min("seq"))["seq"]
    checkpoints = AuditCheckpoint.objects.filter(seq__gt=after_seq,
                                                 algorithm=SignatureAlgorithm.ED25519)
    if late is not None:
        checkpoints = checkpoints.filter(seq__lt=late)
    return checkpoints.order_by("-seq").values_list("seq", flat=True).first()

