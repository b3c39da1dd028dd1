"""Audit trail throughput: appends per second with 8 concurrent writer processes, and the time to
verify 100,000 entries. Prints one JSON line.

Uses a scratch database: `agentgov_bench` on the PostgreSQL of DATABASE_URL (or 127.0.0.1:5432
when it answers), else a temporary SQLite file. Usage: python bench/audit_append.py
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scratch import setup_django  # noqa: E402

WRITERS, EACH, VERIFY_ROWS = 8, 250, 100_000


def main() -> None:
    setup_django()
    from django.db import connection

    writers = [
        subprocess.Popen([sys.executable, str(ROOT / "bench" / "audit_writer.py"), f"w{n}",
                          str(EACH)], env=dict(os.environ), stdout=subprocess.PIPE, text=True)
        for n in range(WRITERS)
    ]
    spans = []
    for writer in writers:
        out, _ = writer.communicate()
        if writer.returncode != 0:
            raise SystemExit("a writer failed")
        spans.append(json.loads(out.strip().splitlines()[-1]))
    append_seconds = max(s["finished"] for s in spans) - min(s["started"] for s in spans)

    from django.utils import timezone

    from audit.chain import entry_hash, format_time
    from audit.models import AuditChainHead, AuditEntry
    from audit.verify import verify_trail

    head = AuditChainHead.objects.get(pk=1)
    seq, previous = head.seq, head.hash
    batch = []
    for i in range(VERIFY_ROWS - seq):
        seq += 1
        fields = {"seq": seq, "at": timezone.now(), "actor": "system:bench",
                  "action": "role.granted", "target": f"bench:{i}", "agent": "refund-agent",
                  "before": {"roles": []}, "after": {"roles": ["owner"], "i": i}, "reason": "",
                  "request_id": "", "prev_hash": previous}
        previous = entry_hash({**fields, "at": format_time(fields["at"])})
        batch.append(AuditEntry(**fields, hash=previous))
        if len(batch) == 5000:
            AuditEntry.objects.bulk_create(batch)
            batch = []
    AuditEntry.objects.bulk_create(batch)
    AuditChainHead.objects.filter(pk=1).update(seq=seq, hash=previous)

    started = time.perf_counter()
    report = verify_trail()
    verify_seconds = time.perf_counter() - started
    assert report.ok and report.count == VERIFY_ROWS, report
    print(json.dumps({
        "bench": "audit_append",
        "database": connection.vendor,
        "writers": WRITERS,
        "appends": WRITERS * EACH,
        "appends_per_second": round(WRITERS * EACH / append_seconds, 1),
        "verify_entries": VERIFY_ROWS,
        "verify_seconds": round(verify_seconds, 2),
    }))


if __name__ == "__main__":
    main()
