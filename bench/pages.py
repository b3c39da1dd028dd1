"""Server time per page and list API at fleet scale (by default 100,000 agents, one in a
hundred with an escalated finding and a pending proposal, and 10,000,000 audit rows): p50 and
p95 of 20 requests through Django's test client (the view, its queries and its template), and
each one's query count. The fleet snapshot is refreshed first, as the workers keep it, and
its time printed. The audit rows come from bench/audit_bulk.py (COPY, valid chain and
tree); its build time is printed too. Prints one JSON line.

Usage: python bench/pages.py [AGENTS] [AUDIT_ROWS]   (scratch stores: see bench/scratch.py)
"""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import audit_bulk  # noqa: E402
from bench.cluster import build_cluster, build_open_work  # noqa: E402
from bench.scratch import setup_django  # noqa: E402

# The floor, measured first in the same run: a request that does nothing but pass the
# middleware (session, user), so a loaded machine's slowdown shows in the floor too.
FLOOR = "/healthz"
PAGES = [FLOOR, "/", "/agents/", "/agents/bench-00042/", "/agents/bench-00100/", "/approvals/",
         "/inbox/", "/escalations/", "/findings/", "/fleet/", "/guardrails/", "/group-rules/",
         "/recertification/", "/toxic/", "/tokens/", "/audit/", "/audit/?agent=bench-00042",
         "/api/v1/agents", "/api/v1/dashboard", "/api/v1/audit", "/api/v1/findings",
         "/api/v1/escalations", "/api/v1/proposals", "/api/v1/guardrails", "/api/v1/inbox",
         "/api/v1/fleet", "/api/v1/group-rules", "/api/v1/recertification",
         "/api/v1/toxic-combinations"]
SAMPLES = 20


def main(agents: int, rows: int) -> None:
    setup_django()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from registry.models import Agent

    names = [f"bench-{i:05d}" for i in range(agents)]
    started = time.perf_counter()
    if not Agent.objects.filter(name=names[-1]).exists():  # BENCH_KEEP_DATABASE=1: built
        build_open_work(build_cluster(agents))
    fleet_s = time.perf_counter() - started
    audit_s = audit_bulk.build(rows, names)  # nothing to do when the chain is that long
    with connection.cursor() as cursor:
        # Planner statistics and the visibility map, as autovacuum keeps them on a live server
        # (bulk loads outrun it: without statistics the lists pick plans that read every
        # agent, and without the map the overview's counts cannot read their indexes alone).
        cursor.execute("VACUUM ANALYZE")
    from reconciliation.jobs import refresh_fleet_snapshot

    # What the workers keep for /fleet/ and /toxic/ (reconciliation/fleet_snapshot.py),
    # computed as they would: its time is the job's, not a request's.
    started = time.perf_counter()
    refresh_fleet_snapshot()
    snapshot_s = time.perf_counter() - started
    admin = (User.objects.filter(username="bench-admin").first()
             or User.objects.create_superuser("bench-admin", password=None))
    client = Client()
    client.force_login(admin)
    timings = {}
    for path in PAGES:
        samples = []
        for sample in range(SAMPLES):
            if sample == 3 and min(samples) > 2000:
                break  # a page this slow is over the target whatever its p95: say so, sooner
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(path)
                samples.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"{path} answered {response.status_code}")
        samples.sort()
        timings[path] = {"ms_p50": round(statistics.median(samples), 1),
                         "ms_p95": round(samples[round(0.95 * (len(samples) - 1))], 1),
                         "queries": len(queries.captured_queries), "samples": len(samples)}
        print(json.dumps({path: timings[path]}), file=sys.stderr, flush=True)
    print(json.dumps({"bench": "pages", "database": connection.vendor, "agents": agents,
                      "audit_rows": rows, "build_s": {"fleet": round(fleet_s, 1),
                                                      "audit": round(audit_s, 1),
                                                      "fleet_snapshot": round(snapshot_s, 1)},
                      "pages": timings,
                      "slowest_p95_ms": max(t["ms_p95"] for t in timings.values()),
                      "p95_over_floor": {path: round(t["ms_p95"] / timings[FLOOR]["ms_p95"], 1)
                                         for path, t in timings.items() if path != FLOOR}}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000,
         int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000)
