"""Audit trail throughput and proof costs, each against a floor measured in the same run. Prints
one JSON line.

- appends/s with 8 writer processes (AUDIT_SEQUENCER as BENCH_AUDIT_SEQUENCER says, default
  `writers`, the product's default; a real RQ worker and the cron sequencing what the writers
  leave queued)
  against 8 writers doing a bare INSERT + COMMIT of the same row shape;
- entry -> sequenced latency p95 (probe entries written while the writers run);
- verify of VERIFY_ROWS entries against hashing the same bytes in a tight loop;
- inclusion and consistency proofs at VERIFY_ROWS entries, p95;
- the v1 JSONL export of VERIFY_ROWS entries (signing its checkpoint, the signer's consistency
  proof to the last head it signed included, then every line written to a file) against reading
  the same rows alone, and `agentctl audit verify` of that file offline (every checkpoint's root
  recomputed, its signature checked) against the hashing floor.

Uses a scratch database (bench/scratch.py). Usage: python bench/audit_append.py
Sizes: BENCH_AUDIT_EACH (appends per writer, 1000), BENCH_AUDIT_VERIFY_ROWS (1,000,000).
"""

import base64
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import build_audit_rows  # noqa: E402
from bench.scratch import setup_django  # noqa: E402

WRITERS = 8
EACH = int(os.environ.get("BENCH_AUDIT_EACH", "1000"))
VERIFY_ROWS = int(os.environ.get("BENCH_AUDIT_VERIFY_ROWS", "1000000"))
SEQUENCER = os.environ.get("BENCH_AUDIT_SEQUENCER", "writers")
PROOFS = 200
PROBE_GAP = 0.05  # seconds between latency probes


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


def start_writers(mode: str, **env: str) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, str(ROOT / "bench" / "audit_writer.py"), f"w{n}",
                              str(EACH), mode], env={**os.environ, **env},
                             stdout=subprocess.PIPE, text=True)
            for n in range(WRITERS)]


def rate(writers: list[subprocess.Popen]) -> tuple[float, float | None]:
    """Appends per second across the writers, and the CPU microseconds each append cost the
    writers and their PostgreSQL backends (None when the server's processes are not on this
    machine)."""
    spans = []
    for writer in writers:
        out, _ = writer.communicate()
        if writer.returncode != 0:
            raise SystemExit("a writer failed")
        spans.append(json.loads(out.strip().splitlines()[-1]))
    seconds = max(s["finished"] for s in spans) - min(s["started"] for s in spans)
    backends = [s["backend_cpu"] for s in spans]
    cpu = (None if None in backends else
           (sum(s["cpu"] for s in spans) + sum(backends)) / (WRITERS * EACH) * 1e6)
    return WRITERS * EACH / seconds, cpu


def probe_latencies(writers: list[subprocess.Popen]) -> list[float]:
    """Write one entry at a time while the writers run; time each until it is sequenced."""
    from django.conf import settings
    from django.db import transaction

    import audit
    from audit.models import AuditPendingEntry

    settings.AUDIT_SEQUENCER = SEQUENCER
    latencies, i = [], 0
    while any(writer.poll() is None for writer in writers) or len(latencies) < 20:
        started = time.perf_counter()
        with transaction.atomic():
            queued = audit.record(actor="system:probe", action="role.granted",
                                  target=f"probe:{i}")
        # Placed at once (its seq is set), or queued: the sequencer deletes the queued row in
        # the transaction that places it, a primary key look-up every 10 ms.
        while queued.seq is None and AuditPendingEntry.objects.filter(id=queued.id).exists():
            time.sleep(0.01)
        latencies.append(time.perf_counter() - started)
        i += 1
        # A probe every ~50 ms, not back to back: polling without a pause took a quarter of the
        # machine's CPU from the writers being measured (2 cores, 2026-12-01).
        time.sleep(PROBE_GAP)
    return latencies


def hashing_floor() -> float:
    """Seconds to hash the bytes verify hashes (chain payload and leaf of every entry)."""
    from agentgov.entries import ENTRY_FIELDS, HASHED_FIELDS, canonical_json

    from audit.verify import iter_entries

    total, chunk = 0.0, []
    for row in iter_entries():
        chunk.append(((canonical_json({k: row[k] for k in HASHED_FIELDS}) + row["prev_hash"])
                      .encode(), canonical_json({k: row[k] for k in ENTRY_FIELDS}).encode()))
        if len(chunk) == 20000:
            total += _time_hashing(chunk)
            chunk = []
    return total + _time_hashing(chunk)


def _time_hashing(chunk: list[tuple[bytes, bytes]]) -> float:
    sha256 = hashlib.sha256
    started = time.perf_counter()
    for payload, leaf in chunk:
        sha256(payload).hexdigest()
        sha256(b"\x00" + leaf).digest()
    return time.perf_counter() - started


def proof_times(size: int) -> tuple[float, float]:
    from audit import tree

    rng = random.Random(13)
    inclusion, consistency = [], []
    for _ in range(PROOFS):
        started = time.perf_counter()
        tree.inclusion_proof(rng.randrange(size), size)
        inclusion.append(time.perf_counter() - started)
        started = time.perf_counter()
        tree.consistency_proof(rng.randrange(1, size), size)
        consistency.append(time.perf_counter() - started)
    return p95(inclusion), p95(consistency)


def read_floor(size: int) -> float:
    """Seconds to read the rows the export writes, in the export's chunks, rendering nothing."""
    from audit.verify import fetch_chunk

    started, after = time.perf_counter(), 0
    while rows := fetch_chunk(after, 2000, upto=size):
        after = rows[-1]["seq"]
    return time.perf_counter() - started


def export_times(size: int) -> tuple[float, float, float, int]:
    """The export as `manage.py audit export` makes it (signed first), its read floor, and the
    offline verify of the file with the public key an auditor holds."""
    import tempfile

    from agentgov import checkpoints
    from agentgov.audit import verify_file

    from audit import keys
    from audit.actions import sign_for_export
    from audit.export import export_chunks

    path = Path(tempfile.mkdtemp()) / "trail.jsonl"
    started = time.perf_counter()
    signed = sign_for_export(actor="system:bench", target="audit", after={"format": "jsonl"})
    with open(path, "w", encoding="utf-8") as out:
        for chunk in export_chunks("jsonl", signed):
            out.write(chunk)
    export_seconds = time.perf_counter() - started
    floor = read_floor(signed)
    public = checkpoints.raw_public_key(keys.signing_key().public_key())
    started = time.perf_counter()
    check = verify_file(path, public_keys=[base64.b64encode(public).decode()])
    offline_seconds = time.perf_counter() - started
    assert check.ok and check.count == signed and check.kind == "export", check
    megabytes = path.stat().st_size // 1_000_000
    path.unlink()
    return export_seconds, floor, offline_seconds, megabytes


def main() -> None:
    setup_django()
    from django.db import connection

    from audit.models import AuditEntry, AuditPendingEntry
    from audit.verify import verify_trail

    floor, floor_cpu = rate(start_writers("bare"))
    AuditPendingEntry.objects.all().delete()
    if connection.vendor == "postgresql":
        # The floor's rows, deleted, are the bench's debris, not the product's queue: reclaim
        # them as autovacuum would (it is off on some servers), so the writers' look-ups at the
        # queue do not walk them.
        with connection.cursor() as cursor:
            cursor.execute("VACUUM audit_auditpendingentry")

    # A worker and the cron, as `make demo` and production run them: the cron's sequencer
    # places what a commit after its holder's last read of the queue left queued.
    env = {**os.environ, "AUDIT_SEQUENCER": SEQUENCER}
    background = [subprocess.Popen([sys.executable, "manage.py", *command], cwd=ROOT, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                  for command in (("rqworker", "default"), ("cron",))]
    try:
        writers = start_writers("record", AUDIT_SEQUENCER=SEQUENCER)
        latencies = probe_latencies(writers)
        appends, append_cpu = rate(writers)
        while AuditPendingEntry.objects.exists():
            time.sleep(0.05)
    finally:
        for process in background:
            process.terminate()
            process.wait(timeout=30)
    report = verify_trail()
    assert report.ok and report.count == AuditEntry.objects.count(), report

    # The writers' entries count towards VERIFY_ROWS; a smaller value (a quick run of the
    # appends alone) verifies what they wrote.
    verify_rows = max(VERIFY_ROWS, report.count)
    build_audit_rows(verify_rows)  # with the stored tree over them, as the sequencer makes it
    if connection.vendor == "postgresql":
        # What autovacuum does after a bulk load: without it the planner still thinks the table
        # holds the writers' few thousand rows and reads each export chunk of the million by a
        # bitmap scan and a sort (~3 s a chunk, 2026-12-02), which measures the stale statistics.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE audit_auditentry")
    started = time.perf_counter()
    report = verify_trail()
    verify_seconds = time.perf_counter() - started
    assert report.ok and report.count == verify_rows, report
    hashing_seconds = hashing_floor()
    inclusion_p95, consistency_p95 = proof_times(verify_rows)
    export_seconds, read_seconds, offline_seconds, megabytes = export_times(verify_rows)
    print(json.dumps({
        "bench": "audit_append",
        "database": connection.vendor,
        "writers": WRITERS,
        "sequencer": SEQUENCER,
        "appends": WRITERS * EACH,
        "appends_per_second": round(appends, 1),
        "floor_inserts_per_second": round(floor, 1),
        "appends_vs_floor": round(appends / floor, 2),
        # CPU per append (writers + their backends; not the cron's placing of what they left)
        # against CPU per bare insert: the same ratio, steadier on a machine others load.
        "cpu_us_per_append": None if append_cpu is None else round(append_cpu),
        "floor_cpu_us_per_insert": None if floor_cpu is None else round(floor_cpu),
        "cpu_floor_vs_append": (None if append_cpu is None or floor_cpu is None
                                else round(floor_cpu / append_cpu, 2)),
        "entry_to_sequenced_p95_seconds": round(p95(latencies), 3),
        "verify_entries": verify_rows,
        "verify_seconds": round(verify_seconds, 2),
        "hashing_floor_seconds": round(hashing_seconds, 2),
        "verify_vs_hashing": round(verify_seconds / hashing_seconds, 1),
        "inclusion_proof_p95_ms": round(inclusion_p95 * 1000, 2),
        "consistency_proof_p95_ms": round(consistency_p95 * 1000, 2),
        "export_entries": verify_rows + 1,
        "export_megabytes": megabytes,
        "export_seconds": round(export_seconds, 2),
        "export_read_floor_seconds": round(read_seconds, 2),
        "export_vs_read": round(export_seconds / read_seconds, 1),
        "offline_verify_seconds": round(offline_seconds, 2),
        "offline_verify_vs_hashing": round(offline_seconds / hashing_seconds, 1),
        "load_average": [round(n, 2) for n in os.getloadavg()],
    }))


if __name__ == "__main__":
    main()
