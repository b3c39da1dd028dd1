"""Exporting the trail as JSONL or CSV, streamed a chunk at a time."""

import csv
import io
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

from agentgov.audit import escape_cell
from asgiref.sync import sync_to_async

from audit.chain import canonical_json
from audit.verify import ENTRY_FIELDS, fetch_chunk

FORMATS = {"jsonl": "application/x-ndjson", "csv": "text/csv"}


def jsonl_lines(rows: Iterable[dict[str, Any]]) -> str:
    """One canonical JSON object per line."""
    return "".join(canonical_json(row) + "\n" for row in rows)


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


def renderer(fmt: str) -> tuple[str, Callable[[Iterable[dict[str, Any]]], str]]:
    """The header text and row renderer for an export format."""
    if fmt == "csv":
        return csv_header(), csv_lines
    return "", jsonl_lines


def export_chunks(fmt: str, chunk: int = 2000) -> Iterator[str]:
    """The whole export as text chunks (for the management command)."""
    header, render = renderer(fmt)
    if header:
        yield header
    after = 0
    while rows := fetch_chunk(after, chunk):
        yield render(rows)
        after = rows[-1]["seq"]


async def export_chunks_async(fmt: str, chunk: int = 2000) -> AsyncIterator[str]:
    """The same chunks for an ASGI streaming response: no chunk list is ever held in memory."""
    header, render = renderer(fmt)
    if header:
        yield header
    after = 0
    load = sync_to_async(fetch_chunk)
    while rows := await load(after, chunk):
        yield render(rows)
        after = rows[-1]["seq"]
