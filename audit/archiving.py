"""Archiving an old prefix of the trail (`manage.py audit archive`): which entries may go, the
boundary the live trail is verified from afterwards, and the file they go to. The state changes
(the boundary record, its entry, deleting the rows) are in audit/actions.py."""

import hashlib
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db.models import Min

from audit import tree
from audit.chain import format_time
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


def file_name(first: int, last: int) -> str:
    return f"audit-archive-{first:012d}-{last:012d}.jsonl"


def write_file(directory: Path, since: AuditArchive | None, last: int) -> tuple[str, str]:
    """Write entries after `since` up to `last` as a v1 export that verifies offline on its own
    (the same bytes whenever it is rewritten: a rerun after a crash writes the same file), with
    fsync before the rename into place and after it; returns (file name, sha256)."""
    from audit.export import entry_lines, preamble  # cycle: audit.export imports this module
    from audit.verify import fetch_chunk  # cycle: audit.verify imports this module

    first = since.last_seq + 1 if since is not None else 1
    name = file_name(first, last)
    signed = AuditCheckpoint.objects.get(seq=last)
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{name}.partial"
    digest = hashlib.sha256()
    with open(partial, "wb") as out:
        def write(text: str) -> None:
            data = text.encode("utf-8")
            digest.update(data)
            out.write(data)

        write(preamble(last, since=since, header={"exported_at": format_time(signed.at),
                                                  "pending": 0, "archive": True}))
        after = first - 1
        while rows := fetch_chunk(after, 2000, upto=last):
            write(entry_lines(rows))
            after = rows[-1]["seq"]
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, directory / name)
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)  # the rename itself survives a power cut
    finally:
        os.close(descriptor)
    return name, digest.hexdigest()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
