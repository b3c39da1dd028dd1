"""Time from a drift landing on a sandbox agent (a "bad deployment", which queues a pass the
way an observed-state PUT does) to the correction verified by the loop, on 2 real workers.
Prints one JSON line with p50/p95.

Usage: python bench/drift_latency.py [SAMPLES]   (scratch stores: see bench/scratch.py)
"""

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cluster import Workers, build_cluster  # noqa: E402
from bench.scratch import setup_django  # noqa: E402

DRIFT = {"tools": ["crm.search", "orders.lookup", "payments.refund"],
         "actions": {"payments.refund": {"max": 5000}}}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main(samples: int) -> None:
    # Drifting agent after agent on purpose: the blast-radius breaker would (rightly) pause.
    os.environ["BREAKER_SHARE_PERCENT"] = "100"
    setup_django()
    from django.db import connection
    from django.utils import timezone

    from reconciliation import actions
    from reconciliation.models import Finding
    from registry.models import Agent

    ids = build_cluster(samples)
    workers = Workers(2)
    latencies = []
    try:
        workers.wait_ready()
        for agent_id in ids:
            agent = Agent.objects.get(pk=agent_id)
            injected = timezone.now()
            actions.sandbox_deploy(agent, actor="system:bench", changes=DRIFT, reason="bench")
            deadline = time.monotonic() + 60
            while True:
                findings = Finding.objects.filter(agent=agent)
                if len(findings) == 2 and all(f.status == "corrected" for f in findings):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"agent {agent.name} was not corrected in 60 s")
                time.sleep(0.005)
            done = max(f.corrected_at for f in findings)
            latencies.append((done - injected).total_seconds() * 1000)
    finally:
        workers.stop()
    print(json.dumps({
        "bench": "drift_latency",
        "database": connection.vendor,
        "samples": samples,
        "workers": 2,
        "drift_to_verified_ms_p50": round(percentile(latencies, 0.5), 1),
        "drift_to_verified_ms_p95": round(percentile(latencies, 0.95), 1),
        "drift_to_verified_ms_mean": round(statistics.mean(latencies), 1),
    }))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
