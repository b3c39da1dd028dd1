"""Verifying stored entries a range at a time, each range's hashing done by C loops (maps over
hashlib) and, on PostgreSQL outside a transaction, the ranges spread over processes.

Each range is RANGE consecutive seqs starting at a multiple of RANGE (plus one), so its leaves
form whole perfect subtrees of the trail's Merkle tree: a range is checked on its own (order,
links, chain hashes, leaf and node hashes) and the caller joins the ranges in order (the link
between two, the subtrees onto one stack). Only the payload bytes are hashed here: that each
entry's columns say what its payload says is PostgreSQL's own constraint (audit/binding.py),
which the caller checks is in force before it takes this path.

No Django here: a worker process imports this module, psycopg and the client package only.
"""

from __future__ import annotations

import json
import pickle
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import psycopg
from agentgov.entries import HASHED_FIELDS, canonical_json, chain_hashes, leaf_data
from agentgov.merkle import decomposition, leaf_hashes, subtree_levels

RANGE = 1 << 16
SNAPSHOT_ID = re.compile(r"[0-9A-F]+-[0-9A-F]+(-[0-9]+)?")  # what pg_export_snapshot() returns
EDITED, DELETED = "edited", "deleted"  # audit.choices.BreakReason's values (no Django here)

# Primary-key order whatever the planner knows (a table without statistics once made every
# chunk sort the rest of it): each range is read by walking the index.
PLAN_SQL = ("SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off")
# The payload and previous hash as the bytes that are hashed (no decoding to text and back).
ROWS_SQL = ("SELECT seq, convert_to(prev_hash, 'UTF8'), hash, convert_to(canonical, 'UTF8') "
            "FROM audit_auditentry WHERE seq >= %s AND seq <= %s ORDER BY seq")
# Entries stored before payloads were (canonical = ''): their payload is rebuilt from the
# columns, the time as format_time writes it and the JSON columns as text to decode here.
LEGACY_SQL = ("SELECT seq, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), "
              "actor, action, target, agent, before::text, after::text, reason, request_id "
              "FROM audit_auditentry WHERE seq = ANY(%s)")


@dataclass
class RangeCheck:
    """What one range of seqs held: how many entries from its first one were sound, the
    perfect subtrees they make, where it first went wrong, and what each asked size needs."""

    start: int | None = None  # the first seq found in the range (None: no rows)
    good: int = 0  # sound entries from `start` on
    first_prev: str = ""
    last_hash: str = ""  # of the last sound entry
    broken: tuple[int, str, str] | None = None
    pieces: list[tuple[int, bytes]] = field(default_factory=list)
    # size -> (the chain hash of entry `size`, the subtrees of this range's entries up to it)
    at_sizes: dict[int, tuple[str, list[tuple[int, bytes]]]] = field(default_factory=dict)


def legacy_payloads(cursor: Any, rows: list[tuple]) -> dict[int, bytes]:
    """seq -> payload rebuilt from the columns, for rows stored without one."""
    prev_of = {row[0]: bytes(row[1]).decode() for row in rows if not row[3]}
    if not prev_of:
        return {}
    cursor.execute(LEGACY_SQL, [list(prev_of)])
    payloads = {}
    for seq, at, actor, action, target, agent, before, after, reason, request_id in cursor:
        entry = {"seq": seq, "at": at, "actor": actor, "action": action, "target": target,
                 "agent": agent, "before": None if before is None else json.loads(before),
                 "after": None if after is None else json.loads(after), "reason": reason,
                 "request_id": request_id, "prev_hash": prev_of[seq]}
        payloads[seq] = canonical_json({name: entry[name] for name in HASHED_FIELDS}).encode()
    return payloads


def check_rows(rows: list[tuple], sizes: list[int], cursor: Any) -> RangeCheck:
    """Check a range's rows (seq, prev_hash as bytes, hash, payload as bytes), seq ordered:
    contiguous seqs, each entry linked to the one before it, each payload hashing to its hash;
    the subtrees of the sound prefix, and what each size in `sizes` needs for its root."""
    result = RangeCheck()
    if not rows:
        return result
    seqs, prevs, hashes, payloads = (list(map(itemgetter(n), rows)) for n in range(4))
    if b"" in payloads:
        rebuilt = legacy_payloads(cursor, rows)
        # A row gone between the two reads (it cannot be, inside one snapshot) hashes to nothing.
        payloads = [payload or rebuilt.get(seq, b"") for seq, payload in zip(seqs, payloads,
                                                                              strict=True)]
    hash_bytes = list(map(str.encode, hashes))
    start, count = seqs[0], len(rows)
    result.start, result.first_prev = start, prevs[0].decode()
    problems = []  # (index, precedence, reason, message): the first one in seq order wins
    if seqs[-1] - start != count - 1:  # seqs are unique and ordered: a gap makes this longer
        at = first_difference(seqs, range(start, start + count))
        problems.append((at, 0, DELETED, f"entry {start + at} is missing "
                                          f"(next entry is {seqs[at]})"))
    if prevs[1:] != hash_bytes[:-1]:
        at = first_difference(prevs[1:], hash_bytes[:-1]) + 1
        problems.append((at, 1, EDITED, f"entry {seqs[at]} does not link to entry "
                                        f"{seqs[at] - 1}: it was edited or inserted"))
    made = chain_hashes(payloads, prevs)
    if made != hashes:
        at = first_difference(made, hashes)
        problems.append((at, 2, EDITED, f"entry {seqs[at]} does not match its hash: "
                                        f"it was edited"))
    good = count
    if problems:
        at, _, reason, message = min(problems)
        good, result.broken = at, (start + at, reason, message)
    result.good = good
    if good:
        levels = subtree_levels(leaf_hashes(leaf_data(payloads[:good], hash_bytes[:good])))
        result.last_hash = hashes[good - 1]
        result.pieces = decomposition(levels, good)
        for size in sizes:
            if start <= size < start + good:
                result.at_sizes[size] = (hashes[size - start],
                                         decomposition(levels, size - start + 1))
    return result


def first_difference(found: Any, expected: Any) -> int:
    return next((n for n, (a, b) in enumerate(zip(found, expected, strict=False)) if a != b),
                min(len(found), len(expected)))


def check_ranges_on(cursor: Any, jobs: list[tuple[int, int, list[int]]]
                    ) -> Iterator[RangeCheck]:
    """check_rows over each (first, last, sizes) in turn, read with `cursor` inside a
    transaction (the caller's or one importing the caller's snapshot)."""
    for statement in PLAN_SQL:
        cursor.execute(statement)
    for first, last, sizes in jobs:
        cursor.execute(ROWS_SQL, [first, last])
        yield check_rows(cursor.fetchall(), sizes, cursor)


def serve() -> None:
    """A worker process (`python -c "from audit.verify_ranges import serve; serve()"`): reads
    (conninfo, snapshot, jobs) pickled on stdin and writes each job's RangeCheck pickled on
    stdout, in order, all read inside the snapshot the caller exported so every worker sees
    the same trail. Started with -c, never by multiprocessing, which would re-import the
    parent's __main__ (a web server's, say) in the child."""
    conninfo, snapshot, jobs = pickle.load(sys.stdin.buffer)
    out = sys.stdout.buffer
    with psycopg.connect(conninfo) as conn, conn.cursor(binary=True) as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        if snapshot:
            if not SNAPSHOT_ID.fullmatch(snapshot):
                raise ValueError(f"not a snapshot id: {snapshot!r}")
            cursor.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")  # no parameters there
        for result in check_ranges_on(cursor, jobs):
            pickle.dump(result, out)
            out.flush()


def ranges(upto: int, after: int = 0) -> list[tuple[int, int]]:
    """Ranges (first, last) covering seqs after+1..upto, each the leaves of whole perfect
    subtrees: from `after` (an archive boundary, anywhere) the largest aligned pieces up to the
    next multiple of RANGE, then RANGE at a time."""
    spans, position = [], after
    while position < upto:
        size = position & -position if position % RANGE else RANGE
        while position + size > upto and size > 1:
            size >>= 1
        if position % RANGE == 0:  # whole ranges (the last one may be short: aligned still)
            size = min(RANGE, upto - position)
        spans.append((position + 1, position + size))
        position += size
    return spans
