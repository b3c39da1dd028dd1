"""A full resync of 10,000 converged agents with 2 real workers, against the time to read the
same rows with one raw SQL query (the floor). Prints one JSON line.

Usage: python bench/resync.py [AGENTS]   (scratch database and Redis: see bench/scratch.py)
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cluster import Workers, build_cluster  # noqa: E402
from bench.scratch import setup_django  # noqa: E402


def main(count: int) -> None:
    setup_django()
    import django_rq
    from django.db import connection

    from reconciliation.jobs import resync

    build_cluster(count)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.id, a.lifecycle, a.generation, a.connector, v.spec, s.converged, "
            "s.converged_generation, s.open_findings, x.state, x.stale_state, x.stale_until "
            "FROM registry_agent a JOIN registry_desiredstateversion v "
            "ON v.id = a.active_version_id JOIN reconciliation_agentstatus s "
            "ON s.agent_id = a.id JOIN reconciliation_sandboxagent x ON x.agent_id = a.id")
        rows = cursor.fetchall()
    floor = time.perf_counter() - started
    assert len(rows) == count

    workers = Workers(2)
    try:
        workers.wait_ready()
        queue = django_rq.get_queue("reconcile")
        started = time.perf_counter()
        batches = resync()
        job_ids = [job.id for job in queue.get_jobs()]
        while queue.count or queue.started_job_registry.count:
            time.sleep(0.01)
        elapsed = time.perf_counter() - started
        finished = queue.finished_job_registry.get_job_ids()
        results = [queue.fetch_job(i).return_value() for i in finished if i in job_ids]
    finally:
        workers.stop()
    print(json.dumps({
        "bench": "resync",
        "database": connection.vendor,
        "agents": count,
        "workers": 2,
        "batches": batches,
        "full_passes_queued": sum(r["queued"] for r in results if r),
        "resync_seconds": round(elapsed, 3),
        "floor_seconds": round(floor, 3),
    }))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
