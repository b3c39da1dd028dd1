"""Offline verification of an exported audit trail (docs/audit-format.md), with no server.

A v1 JSONL export carries signed checkpoints: the chain is walked, the Merkle root recomputed at
every checkpoint's size and its Ed25519 signature checked with a key the auditor trusts, so an
edited, deleted, truncated or re-hashed trail fails with the first bad seq and a plain reason.
A CSV or an old entries-only JSONL carries no checkpoint: only its chain can be checked.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agentgov import checkpoints as signing
from agentgov.entries import GENESIS_HASH, canonical_json, entry_hash, entry_leaf_hash
from agentgov.merkle import TreeBuilder

GENESIS = GENESIS_HASH
EXPORT_FORMAT = "agentgov-audit-export/v1"
EVIDENCE_FORMAT = "agentgov-evidence/v1"
REPORT_FORMAT = "agentgov-framework-report/v1"  # a framework report bundle (docs/frameworks.md)
# The plain reasons the contract names, and one for entries no checkpoint covers.
EDITED, DELETED, TRUNCATED, REHASHED = "edited", "deleted", "truncated", "rehashed"
WITNESS_MISMATCH, WITNESS_MISSING = "witness-mismatch", "witness-missing"
UNKNOWN_KEY = "unknown-key"
RETIRED_KEY = "retired-key"
UNSIGNED = "unsigned"
CHAIN_ONLY = "chain only, nothing proven by a signature"
# The exit statuses `agentctl audit verify` documents in its --help.
EXIT_PROVEN, EXIT_FAILED, EXIT_USAGE, EXIT_CHAIN_ONLY = 0, 1, 2, 3
ROTATION_ACTION = "audit.key_rotated"
ROTATED_FIELDS = ("key_id", "algorithm", "public_key", "created_at")
# A spreadsheet runs a cell starting with one of these as a formula (OWASP's list); the export
# prefixes such a cell, and one starting with the quote itself, with a quote, so it stays data.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")


class Failure(Exception):
    """The first thing wrong with a file: the seq it happens at and one plain reason."""

    def __init__(self, seq: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.seq, self.reason, self.message = seq, reason, message


@dataclass(frozen=True)
class TrailCheck:
    """The outcome: `ok`, how many entries held, the head hash, and the first broken seq."""

    ok: bool
    count: int
    head: str
    broken_seq: int | None = None
    reason: str | None = None
    message: str | None = None
    proven: tuple[str, ...] = field(default=())
    kind: str = "chain"

    def __str__(self) -> str:
        if self.ok and self.kind == "chain":
            return f"CHAIN ONLY {self.count} entries, head {self.head}: {CHAIN_ONLY}"
        if self.ok:
            return f"OK {self.count} entries, head {self.head}"
        if self.reason is None:
            return f"BROKEN at seq {self.broken_seq}"
        return f"FAILED at seq {self.broken_seq}: {self.reason}: {self.message}"

    @property
    def exit_status(self) -> int:
        """0 proven by signatures, 3 chain only, 1 failed (see `agentctl audit verify --help`)."""
        if not self.ok:
            return EXIT_FAILED
        return EXIT_CHAIN_ONLY if self.kind == "chain" else EXIT_PROVEN

    def report(self) -> str:
        """What the command line prints: the summary, then what each checkpoint proves."""
        return "".join(f"{line}\n" for line in (str(self), *self.proven))


def unescape_cell(cell: str) -> str:
    """Undo the export's formula escaping: a leading quote was added, so drop one."""
    return cell[1:] if cell.startswith("'") else cell


def escape_cell(cell: str) -> str:
    """Neutralise a cell a spreadsheet would run as a formula (see FORMULA_STARTS)."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


# --- the chain alone (CSV, old entries-only JSONL) --------------------------------------------


def entry_holds(entry: dict[str, Any] | None, prev: str, seq: int) -> bool:
    if not isinstance(entry, dict):
        return False
    try:
        digest = entry_hash(entry)
    except (KeyError, TypeError, ValueError):
        return False
    return entry.get("seq") == seq and entry.get("prev_hash") == prev and (
        digest == entry.get("hash"))


def verify_entries(entries: Iterable[dict[str, Any] | None], *, after: int = 0,
                   prev: str = GENESIS) -> TrailCheck:
    """Walk entries in file order; None stands for a line that could not be read. `after` and
    `prev` continue a trail whose entries 1..after another file proved (an archive)."""
    expected_seq = after + 1
    for entry in entries:
        if not entry_holds(entry, prev, expected_seq):
            first = entry.get("seq") if isinstance(entry, dict) else None
            if expected_seq == after + 1 and isinstance(first, int) and first > expected_seq:
                return TrailCheck(False, after, prev, expected_seq, DELETED,
                                  f"the file starts at entry {first}: entries {expected_seq}-"
                                  f"{first - 1} are not in it (archived entries: pass the "
                                  "archive files before it)")
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
    """CSV rows back to entries: cells unescaped, seq an int, before and after parsed."""
    with open(path, encoding="utf-8", newline="") as rows:
        for raw in csv.DictReader(rows):
            try:
                row = {name: unescape_cell(cell) for name, cell in raw.items()}
                yield {**row, "seq": int(row["seq"]), "before": json.loads(row["before"]),
                       "after": json.loads(row["after"])}
            except (AttributeError, KeyError, TypeError, ValueError):
                yield None


# --- a v1 export with signed checkpoints ------------------------------------------------------


def checkpoint_name(checkpoint: Mapping[str, Any]) -> str:
    return f"checkpoint {checkpoint.get('size')} (key {checkpoint.get('key_id')}, " \
           f"signed {checkpoint.get('at')})"


class KeyRing(dict):
    """key id -> trusted public key, with the tree sizes each may sign (`ranges`; a key the
    auditor gave without a range signs any size until a proven rotation retires it)."""

    def __init__(self, keys: Mapping[str, Ed25519PublicKey] = {},  # noqa: B006 (read only)
                 ranges: Mapping[str, tuple[int, int | None]] | None = None) -> None:
        super().__init__(keys)
        given = getattr(keys, "ranges", {})
        self.ranges: dict[str, tuple[int, int | None]] = {**given, **(ranges or {})}


def check_signature(checkpoint: Mapping[str, Any], keys: Mapping[str, Ed25519PublicKey],
                     first_unproven: int) -> None:
    try:
        signing.verify_checkpoint(checkpoint, keys, getattr(keys, "ranges", None))
    except signing.UnknownKey as error:
        raise Failure(first_unproven, UNKNOWN_KEY, str(error)) from error
    except signing.RetiredKey as error:
        raise Failure(first_unproven, RETIRED_KEY, str(error)) from error
    except signing.SignatureError as error:
        raise Failure(first_unproven, REHASHED, str(error)) from error


def read_witness(directory: str | Path) -> dict[int, dict[str, Any]]:
    """The checkpoints a directory witness holds, by size (checkpoint-<size>.json files)."""
    found: dict[int, dict[str, Any]] = {}
    for path in sorted(Path(directory).glob("checkpoint-*.json")):
        try:
            checkpoint = json.loads(path.read_text(encoding="utf-8"))
            found[int(checkpoint["size"])] = checkpoint
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise Failure(0, WITNESS_MISMATCH,
                          f"the witness file {path.name} is unreadable") from error
    return found


def signed_part(checkpoint: Mapping[str, Any]) -> str:
    names = (*signing.SIGNED_FIELDS, "algorithm", "signature")
    return canonical_json({name: checkpoint.get(name) for name in names})


class ExportWalk:
    """One pass over a v1 export: the chain, the tree, and each checkpoint as its size passes."""

    def __init__(self, keys: Mapping[str, Ed25519PublicKey],
                 witness: Mapping[int, Mapping[str, Any]] | None) -> None:
        self.keys, self.witness = KeyRing(keys), witness
        self.header: dict[str, Any] | None = None
        self.checkpoints: list[dict[str, Any]] = []
        self.skipped: list[str] = []
        self.tree, self.prev, self.count, self.proven_to = TreeBuilder(), GENESIS, 0, 0
        self.proven: list[str] = []
        self.rotations: list[tuple[int, dict[str, Any]]] = []
        self.boundary = 0  # the entries before it were archived to another file
        self.entries_only = False  # a CSV or entries-only JSONL: only a witness's checkpoints

    def _start_at_boundary(self, boundary: Any) -> None:
        """A file that continues an archived trail starts after entry `size`: the chain from
        that entry's hash, the tree from the frontier at `size` (its complete subtrees, largest
        first), which the signed checkpoint at `size` must prove before any entry counts."""
        try:
            size, head = boundary["size"], boundary["hash"]
            stack = [(int(level), bytes.fromhex(node)) for level, node in boundary["frontier"]]
        except (KeyError, TypeError, ValueError) as error:
            raise Failure(1, EDITED, "the header's archive boundary is unreadable") from error
        levels = [level for level, _ in stack]
        if (not isinstance(size, int) or size < 1 or not isinstance(head, str)
                or levels != sorted(set(levels), reverse=True)
                or sum(1 << level for level in levels) != size
                or any(len(node) != 32 for _, node in stack)):
            raise Failure(1, EDITED, "the header's archive boundary is not a tree of its size")
        self.boundary = self.count = self.tree.size = size
        self.tree._stack = stack
        self.prev = head

    def run(self, lines: Iterable[str]) -> TrailCheck:
        try:
            pending: list[dict[str, Any]] | None = None
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                record = self._parse(line, number)
                if record.get("type") == "entry":
                    if pending is None:
                        pending = self._settle(self._order_checkpoints())
                    self._entry(record.get("entry"))
                    pending = self._settle(pending)
                elif record.get("type") == "checkpoint":
                    if pending is not None:
                        raise Failure(self.count + 1, EDITED, "a checkpoint follows the entries")
                    self._collect(record)
            if self.header is None:
                raise Failure(1, EDITED, "the file has no v1 export header")
            if pending is None:
                pending = self._settle(self._order_checkpoints())
            self._finish(pending)
        except Failure as failure:
            return TrailCheck(False, self.count, self.prev, failure.seq, failure.reason,
                              failure.message, kind="export")
        return TrailCheck(True, self.count, self.prev, proven=(*self.proven, *self.skipped),
                          kind="export")

    def _settle(self, pending: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Prove every checkpoint whose size the walk has just reached."""
        while pending and pending[0]["size"] == self.count:
            self._prove(pending.pop(0))
        if self.proven_to < self.boundary:
            raise Failure(self.boundary + 1, UNSIGNED,
                          f"no checkpoint a trusted key signed proves the archive boundary at "
                          f"entry {self.boundary}")
        return pending

    def _parse(self, line: str, number: int) -> dict[str, Any]:
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            raise Failure(self.count + 1, EDITED, f"line {number} is not a JSON object")
        if record.get("type") == "header":
            if self.header is not None or number != 1:
                raise Failure(self.count + 1, EDITED, f"line {number} is a second header")
            if record.get("format") != EXPORT_FORMAT:
                raise Failure(1, EDITED, f"unknown export format {record.get('format')!r}")
            self.header = record
            if record.get("boundary") is not None:
                self._start_at_boundary(record["boundary"])
        elif self.header is None:
            raise Failure(1, EDITED, "the file has no v1 export header")
        return record

    def _collect(self, record: Mapping[str, Any]) -> None:
        checkpoint = {k: v for k, v in record.items() if k != "type"}
        if checkpoint.get("algorithm") != signing.ALGORITHM:
            self.skipped.append(f"{checkpoint_name(checkpoint)}: "
                                f"{checkpoint.get('algorithm')}, not verifiable offline")
            return
        if not isinstance(checkpoint.get("size"), int) or checkpoint["size"] < 0:
            raise Failure(1, EDITED, "a checkpoint has no valid size")
        self.checkpoints.append(checkpoint)

    def _order_checkpoints(self) -> list[dict[str, Any]]:
        """Check the witness against the file's checkpoints before any entry is read (those
        before an archive boundary prove the archived file, not this one)."""
        pending = sorted((c for c in self.checkpoints if c["size"] >= self.boundary),
                         key=lambda c: c["size"])
        if self.witness is not None:
            by_size = {c["size"]: c for c in pending}
            for size, copy in sorted(self.witness.items()):
                if size < self.boundary:
                    continue
                mine = by_size.get(size)
                if mine is None:
                    # A witnessed checkpoint the file dropped: it must still hold for the file.
                    pending.append({**copy, "witnessed_only": True})
                elif signed_part(mine) != signed_part(copy):
                    raise Failure(size, WITNESS_MISMATCH,
                                  f"the file's checkpoint {size} differs from the witness's copy")
            for size in by_size:
                if size not in self.witness:
                    raise Failure(size, WITNESS_MISSING,
                                  f"the witness holds no copy of checkpoint {size}")
            pending.sort(key=lambda c: c["size"])
        return pending

    def _entry(self, entry: Any) -> None:
        seq = self.count + 1
        if not isinstance(entry, dict) or not isinstance(entry.get("seq"), int):
            raise Failure(seq, EDITED, f"entry {seq} is not an entry object")
        if entry["seq"] > seq and self.entries_only and seq == self.boundary + 1:
            raise Failure(seq, DELETED,
                          f"the file starts at entry {entry['seq']}: entries {seq}-"
                          f"{entry['seq'] - 1} are not in it (archived entries: pass the "
                          f"archive files before it)")
        if entry["seq"] > seq:
            raise Failure(seq, DELETED, f"entry {seq} is missing (the next is {entry['seq']})")
        if entry["seq"] < seq:
            raise Failure(seq, EDITED, f"entry {entry['seq']} appears again after {seq - 1}")
        if entry.get("prev_hash") != self.prev or not entry_holds(entry, self.prev, seq):
            raise Failure(seq, EDITED, f"entry {seq} does not match its hash")
        try:
            self.tree.append(entry_leaf_hash(entry))
        except (KeyError, TypeError, ValueError) as error:
            raise Failure(seq, EDITED, f"entry {seq} cannot be hashed") from error
        if entry.get("action") == ROTATION_ACTION and isinstance(entry.get("after"), dict):
            self.rotations.append((seq, entry["after"]))
        self.prev, self.count = entry["hash"], seq

    def _prove(self, checkpoint: Mapping[str, Any]) -> None:
        first_unproven = max(self.proven_to, self.boundary) + 1
        check_signature(checkpoint, self.keys, first_unproven)
        if checkpoint.get("root") != self.tree.root().hex():
            reason = WITNESS_MISMATCH if checkpoint.get("witnessed_only") else REHASHED
            raise Failure(first_unproven, reason,
                          f"entries up to {checkpoint['size']} do not hash to the root "
                          f"{checkpoint_name(checkpoint)} signed")
        self.proven_to = max(self.proven_to, checkpoint["size"])
        where = "witnessed " if checkpoint.get("witnessed_only") else ""
        if self.boundary and checkpoint["size"] == self.boundary:
            self.proven.append(f"entries 1-{self.boundary} archived (chain head {self.prev}), "
                               f"their tree proven by {where}{checkpoint_name(checkpoint)}")
        else:
            first = self.boundary + 1
            self.proven.append(f"entries {first}-{checkpoint['size']} proven by {where}"
                               f"{checkpoint_name(checkpoint)}")
        self._learn_rotated_keys(checkpoint)

    def _learn_rotated_keys(self, checkpoint: Mapping[str, Any]) -> None:
        """Trust a new key once a checkpoint signed by the previous (trusted) key proves the
        rotation entry that carries the previous key's signature over the new one: the auditor
        need only hold the first key. From then on the previous key is retired at that
        checkpoint's size: it may sign nothing larger, and the new key only larger trees."""
        for seq, after in [r for r in self.rotations if r[0] <= self.proven_to]:
            self.rotations.remove((seq, after))
            if checkpoint.get("key_id") != after.get("previous_key_id"):
                continue  # a rotation is proven by the old key's own checkpoint, or not at all
            previous = self.keys.get(after.get("previous_key_id"))
            form = {name: after.get(name) for name in ROTATED_FIELDS}
            try:
                new = signing.public_key_from_base64(str(after.get("public_key")))
                if previous is None or signing.key_id(new) != after.get("key_id"):
                    continue
                signing.verify_rotation(previous, form, str(after.get("signature_by_previous")))
            except (ValueError, signing.SignatureError):
                continue
            size, old_id = checkpoint["size"], after["previous_key_id"]
            introduced, retired = self.keys.ranges.get(old_id, (0, None))
            self.keys.ranges[old_id] = (introduced, size if retired is None
                                        else min(retired, size))
            if after["key_id"] not in self.keys:
                self.keys.ranges[after["key_id"]] = (size, None)
            self.keys[after["key_id"]] = new
            self.proven.append(f"key {after['key_id']} trusted from the rotation at seq {seq}, "
                               f"signed by key {after['previous_key_id']}")

    def _finish(self, pending: list[dict[str, Any]]) -> None:
        if pending:
            raise Failure(self.count + 1, TRUNCATED,
                          f"{checkpoint_name(pending[0])} covers entries the file lacks "
                          f"(it ends at {self.count})")
        size = self.header.get("size") if self.header else None
        if isinstance(size, int) and size > self.count:
            raise Failure(self.count + 1, TRUNCATED,
                          f"the header says {size} entries, the file ends at {self.count}")
        if self.proven_to < self.count:
            carries = ("the file carries no signed checkpoint and the witness none that covers "
                       "them" if self.entries_only else "no checkpoint a trusted key signed "
                       "covers them")
            raise Failure(self.proven_to + 1, UNSIGNED,
                          f"entries {self.proven_to + 1}-{self.count} are not proven: {carries}")

    def run_entries(self, entries: Iterable[dict[str, Any] | None]) -> TrailCheck:
        """A file of bare entries (CSV, entries-only JSONL) held against the witness's signed
        checkpoints: each must hash to the root the file's entries give at its size, and the
        file is proven only as far as they reach (past that: `unsigned`)."""
        self.header, self.entries_only = {}, True
        try:
            pending = self._settle(self._order_checkpoints())
            for entry in entries:
                self._entry(entry)
                pending = self._settle(pending)
            self._finish(pending)
        except Failure as failure:
            return TrailCheck(False, self.count, self.prev, failure.seq, failure.reason,
                              failure.message, kind="entries")
        return TrailCheck(True, self.count, self.prev, proven=tuple(self.proven),
                          kind="entries")


def verify_export_lines(lines: Iterable[str], keys: Mapping[str, Ed25519PublicKey],
                        witness: Mapping[int, Mapping[str, Any]] | None = None) -> TrailCheck:
    """Verify a v1 export's lines against trusted keys (and a witness's checkpoints, if given)."""
    return ExportWalk(keys, witness).run(lines)


def header_of(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as file:
        try:
            header = json.loads(file.readline())
        except ValueError:
            return {}
    return header if isinstance(header, dict) else {}


def verify_joined(paths: list[Path], keys: Mapping[str, Ed25519PublicKey],
                  witness: Mapping[int, Mapping[str, Any]] | None = None) -> TrailCheck:
    """Verify archive files and the live export after them as one trail: each file proves its
    own entries, and each next file must start exactly where the one before ends (its header's
    boundary: the same entry, chain hash and Merkle frontier the walk of the earlier file
    reached). Keys a proven rotation vouches for carry over. Only the last file is held against
    the witness's checkpoints past its start (an earlier file ends where the next begins)."""
    return _walk_joined(paths, keys, witness)[0]


def _walk_joined(paths: list[Path], keys: Mapping[str, Ed25519PublicKey],
                 witness: Mapping[int, Mapping[str, Any]] | None,
                 continued: bool = False) -> tuple[TrailCheck, ExportWalk | None]:
    """verify_joined, and the last file's walk; `continued`: bare entries follow the last
    file, so it too is held against the witness only up to its own size."""
    proven: list[str] = []
    keys, before = KeyRing(keys), None
    for number, path in enumerate(paths):
        ends = [header_of(later).get("boundary") or {} for later in paths[number + 1:]]
        end = ends[0].get("size") if ends else (header_of(path).get("size") if continued
                                                 else None)
        copies = witness
        if witness is not None and isinstance(end, int):
            copies = {size: copy for size, copy in witness.items() if size <= end}
        walk = ExportWalk(keys, copies)
        with open(path, encoding="utf-8") as lines:
            check = walk.run(lines)
        if not check.ok:
            return TrailCheck(False, check.count, check.head, check.broken_seq, check.reason,
                              f"{path.name}: {check.message}", kind="export"), None
        if before is not None:
            failure = _join_failure(before, walk, path.name)
            if failure is not None:
                return TrailCheck(False, before.count, before.prev, failure.seq, failure.reason,
                                  failure.message, kind="export"), None
        proven += [f"{path.name}: {line}" for line in check.proven]
        keys, before = walk.keys, walk
    assert before is not None
    return TrailCheck(True, before.count, before.prev, proven=tuple(proven),
                      kind="export"), before


def _continued_by_entries(archives: TrailCheck, last: ExportWalk, path: Path,
                          witness: Mapping[int, Mapping[str, Any]]) -> TrailCheck:
    """Bare entries (a CSV or entries-only JSONL of the live trail) after the archives, proven
    by the witness's signed checkpoints past the archives' end: the tree goes on from the
    frontier the archives' walk reached, each witnessed root is recomputed at its size, and the
    rows no witnessed checkpoint reaches are `unsigned`."""
    walk = ExportWalk(last.keys, {size: copy for size, copy in witness.items()
                                  if size >= last.count})
    walk.tree._stack, walk.tree.size = list(last.tree._stack), last.tree.size
    walk.prev, walk.count = last.prev, last.count
    walk.boundary = walk.proven_to = last.count  # the archives proved their own entries
    entries = csv_entries(path) if sniff(path) == "csv" else jsonl_entries(path)
    check = walk.run_entries(entries)
    if not check.ok:
        return TrailCheck(False, check.count, check.head, check.broken_seq, check.reason,
                          f"{path.name}: {check.message}", kind="entries")
    return TrailCheck(True, check.count, check.head,
                      proven=(*archives.proven, *(f"{path.name}: {line}"
                                                  for line in check.proven)), kind="entries")


def _continued_by_csv(archives: TrailCheck, path: Path) -> TrailCheck:
    """A CSV (or entries-only JSONL) export of the live trail after the archives, checked with
    --chain-only: its rows must continue their chain, proven by nothing more."""
    entries = csv_entries(path) if sniff(path) == "csv" else jsonl_entries(path)
    check = verify_entries(entries, after=archives.count, prev=archives.head)
    if not check.ok:
        message = check.message or "an entry does not hold (edited, or out of order)"
        return TrailCheck(False, check.count, check.head, check.broken_seq,
                          check.reason or EDITED, f"{path.name}: {message}", kind="export")
    rows = (f"{path.name}: entries {archives.count + 1}-{check.count} continue the chain "
            "(a CSV carries no checkpoints: its rows are not signed)"
            if check.count > archives.count else f"{path.name}: no entries past the archives")
    return TrailCheck(True, check.count, check.head, proven=(*archives.proven, rows),
                      kind="chain")  # the CSV's rows are proven by no signature: not "OK"


def _join_failure(before: ExportWalk, after: ExportWalk, name: str) -> Failure | None:
    """Why `after` does not continue `before` exactly, if it does not."""
    if after.boundary != before.count:
        if after.boundary > before.count:
            return Failure(before.count + 1, DELETED,
                           f"{name} starts after entry {after.boundary}, but the file before it "
                           f"ends at entry {before.count}: entries are in neither")
        return Failure(after.boundary + 1, EDITED,
                       f"{name} starts after entry {after.boundary}, inside the file before it "
                       f"(which ends at entry {before.count})")
    start = after.header.get("boundary", {}) if after.header else {}
    frontier = [(level, node.hex()) for level, node in before.tree._stack]
    joined = [tuple(node) for node in start.get("frontier", [])]
    if start.get("hash") != before.prev or joined != frontier:
        return Failure(before.count + 1, EDITED,
                       f"{name} does not continue the chain and tree the file before it ends "
                       f"with at entry {before.count}")
    return None


def sniff(path: Path) -> str:
    """What a file is: "evidence", "report" (a framework report bundle), "export" (v1 JSONL),
    "jsonl" (entries only) or "csv"."""
    if path.suffix.lower() == ".csv":
        return "csv"
    with open(path, encoding="utf-8") as file:
        first = file.readline()
    try:
        record = json.loads(first)
    except ValueError:
        record = None
    if record is None and first.lstrip().startswith("{"):
        try:  # a pretty-printed evidence bundle spans lines
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            record = None
    if isinstance(record, dict) and record.get("format") == EVIDENCE_FORMAT:
        return "evidence"
    if isinstance(record, dict) and record.get("format") == REPORT_FORMAT:
        return "report"
    if isinstance(record, dict) and record.get("type") == "header":
        return "export"
    return "jsonl"


def trusted_keys(given: Iterable[str]) -> KeyRing:
    """The keys the auditor trusts, by key id, from base64 text, PEM file paths, or trusted key
    list files (the operator's AUDIT_TRUSTED_KEYS_FILE, which also bounds the tree sizes each
    key may sign)."""
    keys = KeyRing()
    for text in given:
        path = Path(text.strip()).expanduser()
        if path.suffix.lower() == ".json" or (path.is_file() and path.read_bytes()[:1] == b"{"):
            listed, ranges = signing.parse_key_list(path.read_text(encoding="utf-8"))
            keys.update(listed)
            keys.ranges.update(ranges)
            continue
        try:
            key = signing.load_public_key(text)
        except ValueError as error:
            raise UsageMistake(f"--public-key: {error}") from error
        keys[signing.key_id(key)] = key
    return keys


class UsageMistake(ValueError):
    """A request the verifier cannot answer as asked (exit 2, "error: ..."): a key that is not
    one, a file that is not there, files that cannot be joined, nothing to prove a file with."""


class NothingToProve(UsageMistake):
    """Asked to verify a file that carries no signatures without a key or witness to prove it
    with, and without --chain-only: the verifier will not say OK for a chain alone."""


def verify_file(path: str | Path | list[str | Path], fmt: str | None = None, *,
                public_keys: Iterable[str] = (), witness: str | Path | None = None,
                chain_only: bool = False) -> TrailCheck:
    """Verify an export or evidence bundle; the kind is detected unless `fmt` names it. Several
    v1 exports (archives, oldest first, then the live export) are verified as one trail.

    A CSV or entries-only JSONL carries no signature: given keys (and a witness), it is proven
    only by the witness's signed checkpoints, and what they do not reach fails as `unsigned`;
    `chain_only` checks its chain alone, and the result says so (kind "chain")."""
    public_keys = list(public_keys)
    for given in path if isinstance(path, list) else [path]:
        if not Path(given).is_file():
            raise UsageMistake(f"{given}: no such file")
    if isinstance(path, list):
        paths = [Path(p) for p in path]
        if len(paths) == 1:
            path = paths[0]
        else:
            spreadsheet = paths[-1] if sniff(paths[-1]) in ("csv", "jsonl") else None
            if spreadsheet is not None:
                paths = paths[:-1]
            if any(sniff(p) != "export" for p in paths):
                raise UsageMistake("only v1 exports (archives, then the live export or a CSV "
                                 "export) are joined")
            keys = trusted_keys(public_keys)
            if not keys:
                raise NothingToProve("an export is proven by signed checkpoints: pass --public-key")
            try:
                copies = read_witness(witness) if witness is not None else None
            except Failure as failure:
                return TrailCheck(False, 0, GENESIS, failure.seq, failure.reason,
                                  failure.message, kind="export")
            continued = spreadsheet is not None and copies is not None and not chain_only
            joined, last = _walk_joined(paths, keys, copies, continued=continued)
            if spreadsheet is None or not joined.ok:
                return joined
            if continued and last is not None and copies is not None:
                return _continued_by_entries(joined, last, spreadsheet, copies)
            if not chain_only:
                return TrailCheck(False, joined.count, joined.head, joined.count + 1, UNSIGNED,
                                  f"{spreadsheet.name}: "
                                  f"{'a CSV' if sniff(spreadsheet) == 'csv' else 'it'} "
                                  f"carries no signed checkpoint: its "
                                  f"rows after entry {joined.count} are not proven (pass "
                                  f"--witness, whose signed checkpoints can prove them, or "
                                  f"--chain-only to check only that they continue the chain)",
                                  kind="export")
            return _continued_by_csv(joined, spreadsheet)
    path = Path(path)
    fmt = fmt or sniff(path)
    if fmt not in ("jsonl", "csv", "export", "evidence", "report"):
        raise UsageMistake(f"unknown format {fmt!r}; expected jsonl or csv")
    if fmt == "jsonl" and sniff(path) in ("export", "evidence", "report"):
        fmt = sniff(path)
    if fmt in ("csv", "jsonl"):
        entries = csv_entries(path) if fmt == "csv" else jsonl_entries(path)
        if chain_only:
            return verify_entries(entries)
        if not public_keys:
            raise NothingToProve(
                f"{path.name} carries no signed checkpoint: pass --public-key (and --witness, "
                f"whose signed checkpoints can prove it), or --chain-only to check its chain "
                f"alone")
        try:
            copies = read_witness(witness) if witness is not None else None
        except Failure as failure:
            return TrailCheck(False, 0, GENESIS, failure.seq, failure.reason, failure.message,
                              kind="entries")
        return ExportWalk(trusted_keys(public_keys), copies).run_entries(entries)
    if chain_only:
        raise NothingToProve(f"--chain-only is for a CSV or entries-only JSONL; {path.name} is "
                             f"an {fmt}, proven by its signed checkpoints")
    keys = trusted_keys(public_keys)
    if not keys:
        raise NothingToProve(f"an {fmt} is proven by signed checkpoints: pass --public-key")
    try:
        copies = read_witness(witness) if witness is not None else None
    except Failure as failure:
        return TrailCheck(False, 0, GENESIS, failure.seq, failure.reason, failure.message,
                          kind=fmt)
    if fmt == "evidence":
        from agentgov.evidence import verify_bundle

        return verify_bundle(json.loads(path.read_text(encoding="utf-8")), keys, copies)
    if fmt == "report":
        from agentgov.evidence import verify_report

        return verify_report(json.loads(path.read_text(encoding="utf-8")), keys, copies)
    with open(path, encoding="utf-8") as lines:
        return verify_export_lines(lines, keys, copies)
