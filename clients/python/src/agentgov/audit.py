"""Offline verification of an exported audit trail, exactly as the control plane's README
documents it: each entry's hash is sha256(canonical JSON of the entry without `hash` +
the previous hash), seq counts up from 1 and the first prev_hash is 64 zeros."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgov.entries import GENESIS_HASH as GENESIS
from agentgov.entries import canonical_json, entry_hash  # noqa: F401


@dataclass(frozen=True)
class TrailCheck:
    """The outcome: `ok`, how many entries held, the head hash, and the first broken seq."""

    ok: bool
    count: int
    head: str
    broken_seq: int | None = None

    def __str__(self) -> str:
        if self.ok:
            return f"OK {self.count} entries, head {self.head}"
        return f"BROKEN at seq {self.broken_seq}"


def _holds(entry: dict[str, Any] | None, prev: str, seq: int) -> bool:
    if not isinstance(entry, dict):
        return False
    try:
        digest = entry_hash(entry)
    except (KeyError, TypeError, ValueError):
        return False
    return entry.get("seq") == seq and entry.get("prev_hash") == prev and (
        digest == entry.get("hash"))


def verify_entries(entries: Iterable[dict[str, Any] | None]) -> TrailCheck:
    """Walk entries in file order; None stands for a line that could not be read."""
    prev, expected_seq = GENESIS, 1
    for entry in entries:
        if not _holds(entry, prev, expected_seq):
            return TrailCheck(False, expected_seq - 1, prev, expected_seq)
        prev, expected_seq = entry["hash"], expected_seq + 1
    return TrailCheck(True, expected_seq - 1, prev)


def jsonl_entries(path: Path) -> Iterator[dict[str, Any] | None]:
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            try:
                yield json.loads(line)
            except ValueError:
                yield None


def csv_entries(path: Path) -> Iterator[dict[str, Any] | None]:
    """CSV rows back to entries: seq an int, before and after parsed from their JSON text."""
    with open(path, encoding="utf-8", newline="") as rows:
        for row in csv.DictReader(rows):
            try:
                yield {**row, "seq": int(row["seq"]), "before": json.loads(row["before"]),
                       "after": json.loads(row["after"])}
            except (KeyError, TypeError, ValueError):
                yield None


def verify_file(path: str | Path, fmt: str | None = None) -> TrailCheck:
    """Verify a JSONL or CSV export (the format from the file name unless given)."""
    path = Path(path)
    fmt = fmt or ("csv" if path.suffix.lower() == ".csv" else "jsonl")
    if fmt not in ("jsonl", "csv"):
        raise ValueError(f"unknown format {fmt!r}; expected jsonl or csv")
    return verify_entries(csv_entries(path) if fmt == "csv" else jsonl_entries(path))
