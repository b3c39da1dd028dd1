"""Exporting the trail, streamed a chunk at a time: the v1 JSONL form (docs/audit-format.md:
header, signed checkpoints, their keys, entries) that `agentctl audit verify` proves offline,
or CSV rows for spreadsheets, every cell safe from formula injection; and the file an archived
prefix of the trail goes to, in the v1 form."""

import csv
import hashlib
import io
import os
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any

from agentgov.audit import EXPORT_FORMAT, escape_cell
from asgiref.sync import sync_to_async
from django.utils import timezone

from audit import archiving
from audit.chain import canonical_json, format_time
from audit.models import AuditArchive, AuditCheckpoint, AuditKey, AuditPendingEntry
from audit.verify import ENTRY_FIELDS, fetch_chunk

FORMATS = {"jsonl": "application/x-ndjson", "csv": "text/csv"}


def jsonl_lines(rows: Iterable[dict[str, Any]]) -> str:
    """One canonical JSON object per line."""
    return "".join(canonical_json(row) + "\n" for row in rows)


def entry_lines(rows: Iterable[dict[str, Any]]) -> str:
    return jsonl_lines({"type": "entry", "entry": row} for row in rows)


def csv_header() -> str:
    return ",".join(ENTRY_FIELDS) + "\r\n"


def csv_cell(row: dict[str, Any], name: str) -> str:
    """One cell: before and after as canonical JSON text, and anything a spreadsheet would run
    as a formula escaped (agentgov.audit.escape_cell; the offline verifier undoes it)."""
    value = row[name]
    text = canonical_json(value) if name in ("before", "after") else str(value)
    return escape_cell(text)


def csv_lines(rows: Iterable[dict[str, Any]]) -> str:
    """CSV rows, one per entry."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for row in rows:
        writer.writerow([csv_cell(row, name) for name in ENTRY_FIELDS])
    return buffer.getvalue()


def preamble(size: int, *, since: AuditArchive | None = None,
             header: dict[str, Any] | None = None) -> str:
    """The v1 header, every checkpoint up to `size` oldest first, and the keys they name.

    A file that starts after an archive boundary (`since`) carries it in its header (entry
    `since.last_seq`'s hash and the Merkle frontier there) and the checkpoints from it on."""
    start = since.last_seq if since is not None else 0
    checkpoints = [c.to_dict() for c in AuditCheckpoint.objects.filter(seq__lte=size,
                                                                        seq__gte=start)
                   .order_by("seq")]
    named = {c["key_id"] for c in checkpoints if c.get("key_id")}
    keys = [k.to_dict() for k in AuditKey.objects.filter(key_id__in=named).order_by("created_at")]
    header = header or {"exported_at": format_time(timezone.now()),
                        "pending": AuditPendingEntry.objects.count()}
    header = {"type": "header", "format": EXPORT_FORMAT, **header, "size": size}
    if since is not None:
        header["boundary"] = archiving.boundary_of(since)
    return jsonl_lines([header, *({"type": "checkpoint", **c} for c in checkpoints),
                        *({"type": "key", **k} for k in keys)])


def export_chunks(fmt: str, size: int, chunk: int = 2000) -> Iterator[str]:
    """The export of the live entries up to `size` as text chunks (for the management
    command): from entry 1, or from the archive boundary, which the header then carries."""
    since = archiving.newest()
    yield csv_header() if fmt == "csv" else preamble(size, since=since)
    render = csv_lines if fmt == "csv" else entry_lines
    after = since.last_seq if since is not None else 0
    while rows := fetch_chunk(after, chunk, upto=size):
        yield render(rows)
        after = rows[-1]["seq"]


async def export_chunks_async(fmt: str, size: int, chunk: int = 2000) -> AsyncIterator[str]:
    """The same chunks for an ASGI streaming response: no chunk list is ever held in memory."""
    since = await sync_to_async(archiving.newest)()
    yield csv_header() if fmt == "csv" else await sync_to_async(preamble)(size, since=since)
    render = csv_lines if fmt == "csv" else entry_lines
    after = since.last_seq if since is not None else 0
    load = sync_to_async(fetch_chunk)
    while rows := await load(after, chunk, size):
        yield render(rows)
        after = rows[-1]["seq"]


def archive_file_name(first: int, last: int) -> str:
    return f"audit-archive-{first:012d}-{last:012d}.jsonl"


def write_archive_file(directory: Path, since: AuditArchive | None,
                       last: int) -> tuple[str, str]:
    """The file an archive's entries go to (`manage.py audit archive`, audit/archiving.py): the
    entries after `since` up to `last` as a v1 export that verifies offline on its own
    (the same bytes whenever it is rewritten: a rerun after a crash writes the same file), with
    fsync before the rename into place and after it; returns (file name, sha256)."""
    first = since.last_seq + 1 if since is not None else 1
    name = archive_file_name(first, last)
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
