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

from bench.cluster import build_audit_rows  # noqa: E402
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


    from audit.verify import verify_trail

    build_audit_rows(VERIFY_ROWS)

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
