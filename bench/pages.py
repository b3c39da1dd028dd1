"""Server time per page with 10,000 agents and a million audit rows (p50 and p95 of 20
requests, through Django's test client: the view, its queries and its template). Prints one
JSON line.

Usage: python bench/pages.py [AGENTS] [AUDIT_ROWS]   (scratch stores: see bench/scratch.py)
"""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.audit_append import extend_tree  # noqa: E402
from bench.cluster import build_audit_rows, build_cluster  # noqa: E402
from bench.scratch import setup_django  # noqa: E402

PAGES = ["/", "/agents/", "/agents/bench-00042/", "/approvals/", "/escalations/",
         "/findings/", "/guardrails/", "/audit/", "/audit/?agent=bench-00042",
         "/api/v1/agents", "/api/v1/dashboard", "/api/v1/audit"]
SAMPLES = 20


def main(agents: int, rows: int) -> None:
    setup_django()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    names = [f"bench-{i:05d}" for i in range(agents)]
    build_cluster(agents)
    from audit.models import AuditChainHead

    before = AuditChainHead.objects.get(pk=1).seq
    build_audit_rows(rows, names)
    extend_tree(before)  # the Merkle tree over the bulk rows, or the next append cannot grow it
    admin = User.objects.create_superuser("bench-admin", password=None)
    client = Client()
    client.force_login(admin)
    timings = {}
    for path in PAGES:
        samples = []
        for _ in range(SAMPLES):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(path)
                samples.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"{path} answered {response.status_code}")
        samples.sort()
        timings[path] = {"ms_p50": round(statistics.median(samples), 1),
                         "ms_p95": round(samples[round(0.95 * (len(samples) - 1))], 1),
                         "queries": len(queries.captured_queries)}
    print(json.dumps({"bench": "pages", "database": connection.vendor, "agents": agents,
                      "audit_rows": rows, "pages": timings,
                      "slowest_p95_ms": max(t["ms_p95"] for t in timings.values())}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000,
         int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000)
