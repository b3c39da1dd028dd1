"""A full resync of converged agents on real workers, against the time to read the same rows
with one raw SQL query (the floor, measured in the same run). Prints one JSON line per worker
count: timed from `resync()` until every batch job it queued has finished (counted from the
jobs' own results), with agents/s per worker process.

Usage: python bench/resync.py [AGENTS] [--workers 1,2,4] [--connector sandbox|push]
(scratch database and Redis: see bench/scratch.py)
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cluster import Workers, build_cluster  # noqa: E402
from bench.scratch import setup_django  # noqa: E402

FLOOR_SQL = (
    "SELECT a.id, a.lifecycle, a.generation, a.connector, v.spec, s.converged, "
    "s.converged_generation, s.open_findings, x.state, x.stale_state, x.stale_until "
    "FROM registry_agent a JOIN registry_desiredstateversion v "
    "ON v.id = a.active_version_id JOIN reconciliation_agentstatus s "
    "ON s.agent_id = a.id LEFT JOIN reconciliation_sandboxagent x ON x.agent_id = a.id")


def floor_seconds(count: int) -> float:
    """One SQL read of every row the check needs (best of three: the warm cache both see)."""
    from django.db import connection

    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(FLOOR_SQL)
            rows = cursor.fetchall()
        best = min(best, time.perf_counter() - started)
        assert len(rows) == count
    return best


def timed_resync(timeout: float = 600) -> tuple[float, list[dict]]:
    """Seconds from `resync()` until each batch job it queued has finished; their results.
    The registries are emptied first, so every batch job found finished is one of this run's."""
    import django_rq
    from rq.job import Job

    from reconciliation.jobs import resync

    queue = django_rq.get_queue("reconcile")
    connection = queue.connection
    for registry in (queue.finished_job_registry, queue.failed_job_registry):
        connection.delete(registry.key)
    started = time.perf_counter()
    batches = resync()
    deadline = time.monotonic() + timeout
    seen: dict[str, Job] = {}
    while True:
        if queue.failed_job_registry.count:
            raise SystemExit(f"jobs failed: {queue.failed_job_registry.get_job_ids()}")
        fresh = [i for i in queue.finished_job_registry.get_job_ids() if i not in seen]
        for job in Job.fetch_many(fresh, connection):
            if job is not None:
                seen[job.id] = job
        done = [j for j in seen.values() if j.func_name.endswith("resync_range")]
        if len(done) >= batches:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"resync did not finish: {len(done)} of {batches} batches")
        time.sleep(0.005)
    return time.perf_counter() - started, [j.return_value() for j in done]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("agents", nargs="?", type=int, default=10_000)
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    parser.add_argument("--connector", default="sandbox", choices=["sandbox", "push"])
    args = parser.parse_args()
    setup_django()
    import django_rq
    from django.db import connection

    build_cluster(args.agents, connector=args.connector)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    for count in [int(n) for n in args.workers.split(",")]:
        workers = Workers(count)
        try:
            workers.wait_ready()
            timed_resync()  # warm-up: each worker has connected and imported once
            floor = floor_seconds(args.agents)
            elapsed, results = timed_resync()
        finally:
            workers.stop()
        django_rq.get_queue("reconcile").connection.flushdb()
        print(json.dumps({
            "bench": "resync",
            "database": connection.vendor,
            "connector": args.connector,
            "agents": args.agents,
            "workers": count,
            "batches": len(results),
            "agents_needing_pass": sum(r["needs_pass"] for r in results),
            "full_passes_queued": sum(r["queued"] for r in results),
            "resync_seconds": round(elapsed, 3),
            "floor_seconds": round(floor, 3),
            "ratio": round(elapsed / floor, 2),
            "agents_per_second_per_worker": round(args.agents / elapsed / count),
        }), flush=True)


if __name__ == "__main__":
    main()
