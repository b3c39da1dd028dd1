"""Verifying the trail stored in the database against what was signed and witnessed: the chain,
the Merkle root at every checkpoint, each checkpoint's signature and key, the witnesses' copies.

Reads run in an order that makes concurrent appends harmless: witness copies first, then the
checkpoints, then the head, then the entries up to the head. Anything a witness or checkpoint
holds was committed with its entries before it could be read, so an entry missing below it is a
real loss, never a race.
"""

import hashlib
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from agentgov import checkpoints as signed_heads
from agentgov.merkle import EMPTY_ROOT, TreeBuilder
from django.conf import settings
from django.db import DataError, connection, transaction
from django.db.models import Max
from django.utils import timezone
from psycopg.conninfo import make_conninfo

from audit import archiving, binding, keys, signer, tree, verify_ranges, witnesses
from audit.chain import (
    GENESIS_HASH,
    ChainReport,
    checkpoint_signature,
    entry_payload,
    format_time,
    leaf_bytes,
)
from audit.choices import AuditAction, BreakReason, SignatureAlgorithm
from audit.models import (
    AuditArchive,
    AuditChainHead,
    AuditCheckpoint,
    AuditEntry,
    AuditPendingEntry,
)

ENTRY_FIELDS = (
    "seq", "at", "actor", "action", "target", "agent",
    "before", "after", "reason", "request_id", "prev_hash", "hash",
)
# A checkpoint reaches the directory witnesses just after its commit; younger ones may be
# in flight and are not yet held against a witness.
PUBLISH_GRACE = timedelta(seconds=60)


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


# PostgreSQL holds each stored payload to the row's columns in C, parsing it once: every scalar
# as text, `before` and `after` as the same JSON spelled the same (jsonb text keeps 1.0 apart from
# 1). NULL (no payload stored) sends the row's columns to Python, which rebuilds the payload.
BOUND_SQL = """
    CASE WHEN j IS NULL THEN NULL ELSE
        (j->>'seq') = seq::text AND (j->>'actor') = actor AND (j->>'action') = action
        AND (j->>'target') = target AND (j->>'agent') = agent AND (j->>'reason') = reason
        AND (j->>'request_id') = request_id AND (j->>'prev_hash') = prev_hash
        AND (j->>'at') = to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
        AND (j->'before')::text = coalesce(before, 'null'::jsonb)::text
        AND (j->'after')::text = coalesce(after, 'null'::jsonb)::text IS TRUE END"""
# OFFSET 0 keeps the parse from being inlined into (and repeated by) each comparison.
PARSED_SQL = """(SELECT *, CASE WHEN canonical = '' THEN NULL ELSE canonical::jsonb END AS j
    FROM audit_auditentry WHERE seq > %s AND seq <= %s ORDER BY seq OFFSET 0) AS entry"""
COLUMNS = ("at", "actor", "action", "target", "agent", "before", "after", "reason", "request_id")
# A row is (seq, prev_hash, hash, payload), payload None when its columns differ from it.
Row = tuple[int, str, str, str | None]


def iter_payloads(upto: int, chunk: int = 20000, fast: bool = True, after: int = 0
                  ) -> Iterator[Row]:
    """Every entry after seq `after` up to seq `upto` as (seq, prev_hash, hash, payload), in
    seq order.

    One query walks the primary key, streamed a chunk at a time through a server-side cursor on
    PostgreSQL: no per-chunk `seq > last ORDER BY seq LIMIT` that a planner without statistics
    may answer by sorting the rest of the table each time, so the cost stays linear.
    """
    bound = fast and connection.vendor == "postgresql"
    if bound:  # five narrow columns; rows without a payload bring theirs by a second query
        query = (f"SELECT seq, prev_hash, hash, canonical, {BOUND_SQL} "
                 f"FROM {PARSED_SQL} ORDER BY seq")
    else:
        query = (f"SELECT seq, prev_hash, hash, canonical, NULL, {', '.join(COLUMNS)} "
                 f"FROM audit_auditentry WHERE seq > %s AND seq <= %s ORDER BY seq")
    decode = AuditEntry._meta.get_field("before").from_db_value
    with transaction.atomic(), connection.chunked_cursor() as cursor:
        # Inside a transaction the server-side cursor streams instead of being materialised.
        cursor.execute(query, [after, upto])
        chunks = prefetched(cursor, chunk) if bound else iter(lambda: cursor.fetchmany(chunk), [])
        for rows in chunks:
            columns = _columns_of([row[0] for row in rows if not row[3]]) if bound else {}
            for seq, prev_hash, hash_, canonical, matches, *values in rows:
                if bound:
                    if canonical:
                        yield seq, prev_hash, hash_, canonical if matches else None
                        continue
                    values = columns.get(seq)
                    if values is None:  # deleted while verify ran: report it, never guess
                        yield seq, prev_hash, hash_, None
                        continue
                entry = dict(zip(COLUMNS, values, strict=True), seq=seq, prev_hash=prev_hash)
                entry["before"] = decode(entry["before"], None, connection)
                entry["after"] = decode(entry["after"], None, connection)
                if connection.vendor == "sqlite":  # times come back as text there
                    entry["at"] = connection.ops.convert_datetimefield_value(
                        entry["at"], None, connection)
                entry["at"] = format_time(entry["at"])
                payload = entry_payload(entry)
                yield seq, prev_hash, hash_, payload if canonical in ("", payload) else None


def _columns_of(seqs: list[int]) -> dict[int, tuple]:
    """seq -> the COLUMNS of these entries, for the rows that carry no stored payload."""
    if not seqs:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT seq, {', '.join(COLUMNS)} FROM audit_auditentry "
                       f"WHERE seq = ANY(%s)", [seqs])
        return {row[0]: row[1:] for row in cursor.fetchall()}


def prefetched(cursor: Any, chunk: int) -> Iterator[list[tuple]]:
    """The cursor's rows a chunk at a time, the next chunk fetched by a thread meanwhile: the
    database works out chunk n + 1 (waiting for it releases the GIL) while Python hashes chunk n."""
    chunks: queue.Queue = queue.Queue(maxsize=2)
    stop = threading.Event()

    def fetch() -> None:
        try:
            while not stop.is_set():
                rows = cursor.fetchmany(chunk)
                _put(rows)
                if not rows:
                    return
        except Exception as error:  # noqa: BLE001  (handed to the reading thread to raise)
            _put(error)

    def _put(item: Any) -> None:
        while not stop.is_set():
            try:
                return chunks.put(item, timeout=0.1)
            except queue.Full:
                continue

    fetcher = threading.Thread(target=fetch, name="audit-verify-fetch", daemon=True)
    fetcher.start()
    try:
        while True:
            item = chunks.get()
            if isinstance(item, Exception):
                raise item
            if not item:
                return
            yield item
    finally:
        stop.set()
        fetcher.join()


def _first_difference(found: list, expected: list) -> int:
    """Where two lists first differ (an extra or missing item included)."""
    pairs = zip(found, expected, strict=False)
    return next((n for n, (a, b) in enumerate(pairs) if a != b), min(len(found), len(expected)))


class TreeCheck:
    """The stored tree (audit_audittreenode, which proofs and roots are served from) held
    against the tree the walk recomputes. The walk appends each subtree it completes to its
    level's list (every level completes in index order); every CHUNK entries each list is
    compared, whole, with the stored nodes of the same primary-key range (on PostgreSQL by one
    digest of the range, the rows read only when it differs), so memory stays flat."""

    CHUNK = 65536

    def __init__(self, size: int, start: int = 0) -> None:
        self.levels: list[list[bytes]] = [[] for _ in range(max(size, 1).bit_length() + 1)]
        # After an archive boundary the walk completes subtrees from there on.
        self.next_index = [start >> level for level in range(len(self.levels))]
        self.bad: tuple[int, int] | None = None  # (level, index) of the first wrong node

    def flush(self) -> None:
        """Compare what the walk completed since the last flush with the stored nodes."""
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql" and connection.in_atomic_block:
                # Without statistics the planner picks a bitmap scan and sorts each range
                # again; the primary key already walks it in order (measured 2x faster).
                cursor.execute("SET LOCAL enable_bitmapscan = off")
            for level, made in enumerate(self.levels):
                if not made:
                    continue
                first = self.next_index[level]
                start = tree.position(level, first)
                if self.bad is None and not self._same(cursor, start, made):
                    cursor.execute("SELECT position, hash FROM audit_audittreenode WHERE "
                                   "position >= %s AND position < %s ORDER BY position",
                                   [start, start + len(made)])
                    stored = [tuple(row) for row in cursor.fetchall()]
                    expected = [(start + n, node.hex()) for n, node in enumerate(made)]
                    if stored != expected:
                        self.bad = (level, first + _first_difference(stored, expected))
                self.next_index[level] = first + len(made)
                made.clear()

    @staticmethod
    def _same(cursor: Any, start: int, made: list[bytes]) -> bool:
        """Whether the stored range equals `made`, by a digest PostgreSQL makes of its hashes in
        order (one row back instead of thousands); False elsewhere, so the rows are compared."""
        if connection.vendor != "postgresql":
            return False
        # The rows come in primary-key order from the subquery (an ORDER BY inside string_agg
        # would sort them again); were they ever not, the digests differ and the rows decide.
        cursor.execute("SELECT sha256(convert_to(coalesce(string_agg(hash, ''), ''), 'UTF8')) "
                       "FROM (SELECT hash FROM audit_audittreenode WHERE position >= %s "
                       "AND position < %s ORDER BY position) AS nodes",
                       [start, start + len(made)])
        return bytes(cursor.fetchone()[0]) == hashlib.sha256(b"".join(made).hex().encode()).digest()

    def problem(self) -> tuple[int, str, str] | None:
        return None if self.bad is None else _node_problem(*self.bad)


def _node_problem(level: int, index: int) -> tuple[int, str, str]:
    first, last = index << level, ((index + 1) << level)
    return (first + 1, BreakReason.EDITED,
            f"the stored Merkle tree node over entries {first + 1} to {last} is missing "
            f"or differs from the entries: proofs served from it would be wrong")


def frontier_problem(frontiers: dict[int, tuple[tuple[int, bytes], ...]]
                     ) -> tuple[int, str, str] | None:
    """The stored nodes every root is made from (the complete subtrees a tree of each size
    decomposes into: at the head, where the next checkpoint's root comes from, and at each
    checkpoint) held against the walk's, in one query per few thousand nodes; the wrong one
    covering the earliest entries, if any."""
    expected: dict[tuple[int, int], bytes] = {}
    for stack in frontiers.values():
        start = 0
        for level, digest in stack:
            expected[(level, start >> level)] = digest
            start += 1 << level
    wanted, stored = list(expected), {}
    for at in range(0, len(wanted), 2000):
        stored.update(tree.load(wanted[at:at + 2000]))
    bad = [node for node, digest in expected.items() if stored.get(node) != digest]
    if not bad:
        return None
    return _node_problem(*min(bad, key=lambda node: node[1] << node[0]))


@dataclass
class Walk:
    """What one pass over the entries found: where the chain first breaks (if it does), the
    Merkle root at every size asked for."""

    count: int = 0
    head_hash: str = GENESIS_HASH
    root: str = EMPTY_ROOT.hex()
    broken: tuple[int, str, str] | None = None
    chain_at: dict[int, str] = field(default_factory=dict)
    roots_at: dict[int, str] = field(default_factory=dict)
    tree: tuple[int, str, str] | None = None  # the first stored tree node that is wrong
    # size -> the (level, hash) complete subtrees a tree of that size decomposes into
    frontiers: dict[int, tuple[tuple[int, bytes], ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Seed:
    """Where a walk starts: after entry `size`, from its chain hash and the Merkle frontier
    there (complete subtrees, largest first); genesis by default."""

    size: int = 0
    head: str = GENESIS_HASH
    frontier: tuple[tuple[int, bytes], ...] = ()

    @classmethod
    def of(cls, archive: AuditArchive | None) -> "Seed":
        """The live trail's start: after the archive boundary, from the stored frontier."""
        if archive is None:
            return cls()
        try:
            stack = archiving.frontier(archive.last_seq)
        except KeyError:  # a frontier node is gone: the boundary check reports it
            stack = []
        return cls(archive.last_seq, archive.last_hash,
                   tuple((level, bytes.fromhex(node)) for level, node in stack))


def walk(rows: Iterator[Row], sizes: set[int], nodes: TreeCheck | None = None,
         seed: Seed = Seed()) -> Walk:
    """Check seq, links and hashes in order, keeping the running Merkle root (and holding each
    completed subtree against the stored one, until one differs)."""
    result, builder = Walk(), TreeBuilder()
    made = nodes.levels if nodes is not None else None
    flush_every = TreeCheck.CHUNK
    expected, previous = seed.size + 1, seed.head
    sha256 = hashlib.sha256
    # TreeBuilder.append's own stack, grown inline: it also lists the subtrees each leaf
    # completes (for a store), which verify does not need and which cost as much as a hash.
    stack = builder._stack
    stack.extend(seed.frontier)
    builder.size = seed.size
    if seed.size:
        result.roots_at[seed.size] = builder.root().hex()
        result.chain_at[seed.size] = seed.head
        result.frontiers[seed.size] = tuple(stack)
    for seq, prev_hash, hash_, payload in rows:
        if seq != expected:
            if seq > expected:
                result.broken = (expected, BreakReason.DELETED,
                                 f"entry {expected} is missing (next entry is {seq})")
            else:
                result.broken = (seq, BreakReason.EDITED,
                                 f"entry {seq} appears out of order after entry {expected - 1}")
            break
        if prev_hash != previous:
            result.broken = (seq, BreakReason.EDITED, f"entry {seq} does not link to entry "
                                                      f"{seq - 1}: it was edited or inserted")
            break
        if payload is None or sha256((payload + prev_hash).encode()).hexdigest() != hash_:
            result.broken = (seq, BreakReason.EDITED,
                             f"entry {seq} does not match its hash: it was edited")
            break
        level, node = 0, sha256(b"\x00" + leaf_bytes(payload, hash_)).digest()
        if made is not None:
            made[0].append(node)
        while stack and stack[-1][0] == level:
            node = sha256(b"\x01" + stack.pop()[1] + node).digest()
            level += 1
            if made is not None:
                made[level].append(node)
        stack.append((level, node))
        if made is not None and seq % flush_every == 0:
            nodes.flush()
        builder.size = seq
        if seq in sizes:
            result.roots_at[seq] = builder.root().hex()
            result.chain_at[seq] = hash_
            result.frontiers[seq] = tuple(stack)
        previous, expected = hash_, expected + 1
    result.count, result.head_hash = expected - 1, previous
    result.root = builder.root().hex()
    result.frontiers[result.count] = tuple(stack)
    if nodes is not None:
        nodes.flush()
        result.tree = nodes.problem()
    return result


def walk_ranges(upto: int, sizes: set[int], seed: Seed = Seed()) -> Walk:
    """walk() a range at a time (audit/verify_ranges.py), the ranges joined here in order: the
    link from one to the next, their subtrees onto one stack, the roots at the sizes asked for.
    For PostgreSQL with the columns bound to the payloads by its constraint."""
    asked = sorted(sizes)
    jobs = [(first, last, [size for size in asked if first <= size <= last])
            for first, last in verify_ranges.ranges(upto, after=seed.size)]
    result, builder = Walk(), TreeBuilder()
    builder.size, builder._stack = seed.size, list(seed.frontier)
    if seed.size:
        result.roots_at[seed.size] = builder.root().hex()
        result.chain_at[seed.size] = seed.head
        result.frontiers[seed.size] = tuple(builder._stack)
    expected, previous = seed.size + 1, seed.head
    checks = _range_checks(jobs)
    try:
        for check in checks:
            if check.start is None:
                continue  # no rows here: a later range's start says what is missing
            if check.start != expected:
                result.broken = (expected, BreakReason.DELETED,
                                 f"entry {expected} is missing (next entry is {check.start})")
                break
            if check.first_prev != previous:
                result.broken = (expected, BreakReason.EDITED,
                                 f"entry {expected} does not link to entry {expected - 1}: "
                                 f"it was edited or inserted")
                break
            for size, (chain, pieces) in check.at_sizes.items():
                at = TreeBuilder()
                at.size, at._stack = builder.size, list(builder._stack)
                for level, node in pieces:
                    at.push(level, node)
                result.roots_at[size] = at.root().hex()
                result.chain_at[size] = chain
                result.frontiers[size] = tuple(at._stack)
            for level, node in check.pieces:
                builder.push(level, node)
            if check.good:
                expected, previous = expected + check.good, check.last_hash
            if check.broken:
                result.broken = check.broken
                break
    finally:
        checks.close()
    result.count, result.head_hash = expected - 1, previous
    result.root = builder.root().hex()
    result.frontiers[result.count] = tuple(builder._stack)
    return result


def _range_checks(jobs: list[tuple[int, int, list[int]]]) -> Iterator[verify_ranges.RangeCheck]:
    """Each job's RangeCheck in order: from AUDIT_VERIFY_PROCESSES worker processes reading
    inside this connection's exported snapshot, or here, inside the caller's transaction (whose
    own uncommitted entries no other connection could see)."""
    processes = min(settings.AUDIT_VERIFY_PROCESSES, len(jobs))
    if processes < 2 or connection.in_atomic_block:
        with transaction.atomic(), connection.cursor() as cursor:
            try:
                yield from verify_ranges.check_ranges_on(cursor, jobs)
            finally:  # the caller's transaction goes on planning as before
                cursor.execute("RESET enable_seqscan")
                cursor.execute("RESET enable_bitmapscan")
        return
    with transaction.atomic():  # the snapshot lives as long as this transaction
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_export_snapshot()")
            snapshot = cursor.fetchone()[0]
        workers = [_start_worker(snapshot, jobs[n::processes]) for n in range(processes)]
        try:
            for n in range(len(jobs)):
                try:
                    yield pickle.load(workers[n % processes].stdout)
                except EOFError:
                    raise RuntimeError("an audit verify worker process failed (its error is "
                                       "in this process's stderr)") from None
        finally:
            for worker in workers:
                worker.kill()
                worker.wait()


def _start_worker(snapshot: str, jobs: list[tuple[int, int, list[int]]]) -> subprocess.Popen:
    params = connection.settings_dict
    conninfo = make_conninfo(
        dbname=params["NAME"], user=params.get("USER") or None,
        password=params.get("PASSWORD") or None, host=params.get("HOST") or None,
        port=str(params["PORT"]) if params.get("PORT") else None,
        **{key: value for key, value in params.get("OPTIONS", {}).items()
           if key in ("sslmode", "sslrootcert", "sslcert", "sslkey", "options")})
    worker = subprocess.Popen(
        [sys.executable, "-c", "from audit.verify_ranges import serve; serve()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=settings.BASE_DIR,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(settings.BASE_DIR), os.environ.get("PYTHONPATH")]))})
    pickle.dump((conninfo, snapshot, jobs), worker.stdin)
    worker.stdin.close()
    return worker


def walk_trail(upto: int, sizes: set[int], full_tree: bool = False,
               since: AuditArchive | None = None) -> Walk:
    """walk() over the stored entries; if PostgreSQL cannot even parse a stored payload (it was
    tampered with), walk again rebuilding every payload in Python, which names the entry.

    The stored tree is held against the walk's where roots are made from (the frontier at the
    head and at every size asked for), or, with `full_tree`, node by node everywhere."""
    seed = Seed.of(since)
    if not full_tree and binding.columns_bound():
        result = walk_ranges(upto, sizes, seed)
        if not result.broken:
            result.tree = frontier_problem(result.frontiers)
        return result
    for fast in (True, False):
        rows = iter_payloads(upto, fast=fast, after=seed.size)
        try:
            result = walk(rows, sizes, TreeCheck(upto, seed.size) if full_tree else None, seed)
            break
        except DataError:
            if not fast:
                raise
        finally:
            rows.close()  # its cursor, thread and transaction end here, not when collected
    if not full_tree and not result.broken:
        result.tree = frontier_problem(result.frontiers)
    return result


def verify_trail(*, full_tree: bool = False, witnessed: bool = True) -> ChainReport:
    """Walk the whole trail; report ok, or the first bad seq, a reason word and a plain why.

    Every stored tree node a signed or future root is made from is checked; `full_tree` also
    checks every other node (those only inclusion and consistency proofs use, which a client
    checks against a signed root anyway): ~2 nodes per entry more to read. `witnessed=False`
    leaves the witnesses out (before a witness is handed the checkpoints it lacks)."""
    started = timezone.now()
    remembered = _remembered()
    held = ({url: witnesses.copies(url) for url in witnesses.readable_witnesses()}
            if witnessed else {})
    checkpoints = {c.seq: c for c in AuditCheckpoint.objects.order_by("seq")}
    archives = list(AuditArchive.objects.order_by("last_seq"))
    head = AuditChainHead.objects.filter(pk=1).first()
    end = head.seq if head is not None else 0
    sizes = set(checkpoints) | {size for copies in held.values() for size in copies}
    since = archives[-1] if archives else None
    result = walk_trail(end, sizes, full_tree=full_tree, since=since)
    problems: list[tuple[int, str, str]] = []
    if result.broken:
        problems.append(result.broken)
    else:
        problems += _head_problems(result, head)
    problems += _archive_problems(result, archives, checkpoints)
    problems += _checkpoint_problems(result, checkpoints, since.last_seq if since else 0)
    problems += _witness_problems(result, checkpoints, held, started)
    problems += _memory_problems(result, checkpoints, remembered)
    # The stored tree is held against the entries only when they are sound: an entry edited or
    # forged also leaves its stored leaf behind, and the chain or checkpoint says better why.
    if not problems and result.tree:
        problems.append(result.tree)
    report = ChainReport(True, result.count, result.head_hash)
    report.checkpoints = sum(1 for size in checkpoints if size <= result.count)
    report.root = result.root
    report.pending = AuditPendingEntry.objects.count()  # shown, never hidden: not yet placed
    if problems:
        seq, reason, problem = min(problems, key=lambda found: found[0])
        report.ok, report.first_broken_seq, report.reason, report.problem = (
            False, seq, str(reason), problem)
    return report


def _head_problems(result: Walk, head: AuditChainHead | None) -> list[tuple[int, str, str]]:
    if head is None:
        return []
    if head.seq != result.count:
        return [(result.count + 1, BreakReason.TRUNCATED,
                 f"the log ends at entry {result.count} but its head records entry {head.seq}")]
    if head.hash != result.head_hash:
        return [(head.seq, BreakReason.EDITED,
                 f"entry {head.seq} is not the head the chain records")]
    # Rows past the head were slipped in without it. The newest row is read before the head:
    # a row committed in between is committed with its head, so it never counts as beyond.
    newest = AuditEntry.objects.aggregate(seq=Max("seq"))["seq"] or 0
    current = AuditChainHead.objects.filter(pk=1).values_list("seq", flat=True).first() or 0
    if newest > current:
        return [(current + 1, BreakReason.EDITED,
                 f"entry {current + 1} lies beyond the head of the chain")]
    return []


def _archive_problems(result: Walk, archives: list[AuditArchive],
                      checkpoints: dict[int, AuditCheckpoint]) -> list[tuple[int, str, str]]:
    """The archives must follow on from one another from entry 1, the boundary must sit on a
    signed checkpoint whose root the stored frontier makes (checked with the checkpoints), and
    the newest must be the one its `audit.archived` entry in the live trail announced: a
    boundary moved up to hide deleted rows, or a record edited, disagrees with the entry."""
    if not archives:
        return []
    problems: list[tuple[int, str, str]] = []
    previous_last, previous_hash = 0, GENESIS_HASH
    for archive in archives:
        if archive.first_seq != previous_last + 1 or archive.prev_hash != previous_hash:
            problems.append((previous_last + 1, BreakReason.EDITED,
                             f"the archive records do not follow on from one another at entry "
                             f"{previous_last + 1}"))
            break
        previous_last, previous_hash = archive.last_seq, archive.last_hash
    boundary = archives[-1]
    after = boundary.last_seq + 1
    if boundary.last_seq not in checkpoints:
        problems.append((after, BreakReason.TRUNCATED,
                         f"no signed checkpoint proves the archive boundary at entry "
                         f"{boundary.last_seq}"))
    elif len(result.frontiers.get(boundary.last_seq, ())) != bin(boundary.last_seq).count("1"):
        problems.append((after, BreakReason.EDITED,
                         f"the stored Merkle frontier at the archive boundary (entry "
                         f"{boundary.last_seq}) is missing nodes"))
    if result.broken:  # the entries past the break, the announcement among them, are unproven
        return problems
    announced = (AuditEntry.objects.filter(action=AuditAction.AUDIT_ARCHIVED,
                                           seq__gt=boundary.last_seq, seq__lte=result.count)
                 .order_by("-seq").values_list("seq", "after").first())
    if announced is None:
        problems.append((after, BreakReason.DELETED,
                         f"entries 1-{boundary.last_seq} are gone, but no audit.archived entry "
                         f"in the live trail announces an archive of them"))
        return problems
    seq, said = announced
    said = said or {}
    if said.get("last_seq") != boundary.last_seq:
        cut = min(int(said.get("last_seq") or 0), boundary.last_seq) + 1
        problems.append((cut, BreakReason.DELETED,
                         f"the archive boundary says entries up to {boundary.last_seq} were "
                         f"archived, but its audit.archived entry (seq {seq}) says up to "
                         f"{said.get('last_seq')}: entries were removed without an archive"))
    elif {k: said.get(k) for k in boundary.to_dict()} != boundary.to_dict():
        problems.append((after, BreakReason.EDITED,
                         f"the archive record of entries {boundary.first_seq}-"
                         f"{boundary.last_seq} differs from its audit.archived entry (seq {seq})"))
    return problems


def _checkpoint_problems(
    result: Walk, checkpoints: dict[int, AuditCheckpoint], archived: int = 0,
) -> list[tuple[int, str, str]]:
    """Each checkpoint must be signed by a trusted key (the configured list, never the
    database's key table or its rotation entries), at a tree size that key may sign, and match
    the entries it covers. A failing one is reported at the first seq no earlier checkpoint
    proved (as the offline verifier reports it, docs/audit-format.md). Those below the archive
    boundary (`archived`) are checked for their signature only: their entries are in the
    archive file, which proves them offline; the one at the boundary must have the stored
    frontier's root."""
    failures: list[tuple[int, str, str]] = []
    problems: list[tuple[int, str, str]] = []
    proven = [0]
    trusted, ranges = keys.trusted()
    for size, checkpoint in sorted(checkpoints.items()):
        if checkpoint.algorithm == SignatureAlgorithm.HMAC_SHA256:
            expected = checkpoint_signature(settings.AUDIT_SIGNING_KEY, size, checkpoint.head_hash)
            signed = checkpoint.signature == expected
            matches = size < archived or result.chain_at.get(size) == checkpoint.head_hash
        else:
            try:
                signed_heads.verify_checkpoint(checkpoint.to_dict(), trusted, ranges)
                signed = True
            except signed_heads.UnknownKey:
                failures.append((size, BreakReason.UNKNOWN_KEY,
                                 f"the checkpoint at entry {size} is signed by key "
                                 f"{checkpoint.key_id!r}, which is not a trusted key"))
                continue
            except signed_heads.RetiredKey as error:
                failures.append((size, BreakReason.RETIRED_KEY, f"the checkpoint at entry "
                                 f"{size}: {error}"))
                continue
            except signed_heads.SignatureError:
                signed = False
            matches = size < archived or result.roots_at.get(size) == checkpoint.root
        if not signed:
            failures.append((size, BreakReason.REHASHED,
                             f"the checkpoint at entry {size} has an invalid signature"))
        elif size > result.count:
            if not result.broken:
                problems.append((result.count + 1, BreakReason.TRUNCATED,
                                 f"a signed checkpoint covers {size} entries but the log ends "
                                 f"at entry {result.count}: entries were cut off"))
        elif not matches:
            failures.append((size, BreakReason.REHASHED,
                             f"entries up to {size} differ from the signed checkpoint at "
                             f"{size}: the log was rewritten and re-hashed"))
        else:
            proven.append(size)
    for size, reason, problem in failures:
        since = max(p for p in proven if p < size) + 1
        problems.append((since, reason, problem))
    return problems


def _remembered() -> dict[str, Any] | None:
    """The last head the signer signed, as it keeps it outside the database (audit/signer.py),
    or None (none yet, or unreadable: the signer itself refuses on that)."""
    try:
        return signer.last_signed()
    except signer.SigningRefused:
        return None


def _memory_problems(result: Walk, checkpoints: dict[int, AuditCheckpoint],
                     remembered: dict[str, Any] | None) -> list[tuple[int, str, str]]:
    """The signer's memory is a witness the database cannot reach: its last signed head must
    be in the database, with the same root, and the log must reach it."""
    if remembered is None:
        return []
    size, root = remembered["size"], remembered["root"]
    checkpoint = checkpoints.get(size)
    if size > result.count and not result.broken:
        return [(result.count + 1, BreakReason.TRUNCATED,
                 f"the signer remembers signing a head of {size} entries but the log ends at "
                 f"entry {result.count}: entries were cut off")]
    if checkpoint is None:
        return [(size, BreakReason.WITNESS_MISSING,
                 f"the checkpoint at entry {size}, which the signer remembers signing, is "
                 f"missing from the database")]
    if checkpoint.root != root:
        return [(size, BreakReason.WITNESS_MISMATCH,
                 f"the checkpoint at entry {size} differs from the head the signer remembers "
                 f"signing")]
    return []


def _deleted_checkpoint_problem(result: Walk, url: str, size: int,
                                copy: dict[str, Any] | None) -> tuple[int, str, str]:
    """A witness copy whose checkpoint the database no longer has: held against the entries
    (its root recomputed from them at its size) and the trusted keys, so a rewrite that also
    deleted the checkpoints that would object is named as one."""
    where = f"the checkpoint at entry {size}, held by witness {url}"
    if not isinstance(copy, dict):
        return (size, BreakReason.WITNESS_MISMATCH, f"{where}, is unreadable")
    try:
        signed_heads.verify_checkpoint(copy, *keys.trusted())
    except signed_heads.SignatureError as error:
        return (size, BreakReason.WITNESS_MISMATCH,
                f"{where}, is missing from the database, and the witness's copy does not hold "
                f"({error}): another trail's witness, or a forged copy")
    root = result.roots_at.get(size)
    if root is not None and root != copy.get("root"):
        return (size, BreakReason.WITNESS_MISMATCH,
                f"{where}, is missing from the database, and entries up to {size} do not hash "
                f"to the root the witness holds: the log was rewritten and the checkpoint "
                f"deleted")
    return (size, BreakReason.WITNESS_MISSING, f"{where}, is missing from the database")


def _witness_problems(
    result: Walk,
    checkpoints: dict[int, AuditCheckpoint],
    held: dict[str, dict[int, dict[str, Any] | None]],
    started: Any,
) -> list[tuple[int, str, str]]:
    """Every witness copy must be in the database as it was published, and every checkpoint
    old enough must have reached every witness."""
    problems: list[tuple[int, str, str]] = []
    for url, copies in held.items():
        for size, copy in copies.items():
            checkpoint = checkpoints.get(size)
            if checkpoint is None and size > result.count and not result.broken:
                problems.append((result.count + 1, BreakReason.TRUNCATED,
                                 f"witness {url} holds a checkpoint of {size} entries but the "
                                 f"log ends at entry {result.count}: entries were cut off"))
            elif checkpoint is None:
                problems.append(_deleted_checkpoint_problem(result, url, size, copy))
            elif copy != checkpoint.to_dict():
                problems.append((size, BreakReason.WITNESS_MISMATCH,
                                 f"the checkpoint at entry {size} differs from witness {url}'s "
                                 f"copy"))
        for size, checkpoint in checkpoints.items():
            published = checkpoint.algorithm == SignatureAlgorithm.ED25519
            if published and size not in copies and checkpoint.at < started - PUBLISH_GRACE:
                problems.append((size, BreakReason.WITNESS_MISSING,
                                 f"the checkpoint at entry {size} never reached witness {url}"))
    return problems
