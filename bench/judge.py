"""Judging proposals against toxic combinations at fleet scale: the time to judge one proposal
and to re-judge 100 pending proposals (what saving a rule or guardrail does), with the old
judge (every approved spec of the fleet, both whole fleet graphs, per proposal; kept here only
as the reference) and the judge that reads the proposal's neighbourhood. The fleet is
bench.cluster.build_cluster(N) (every agent reads customers_db) with one enabled rule every
agent could join (customers_db read and external email); each proposal adds external email.

Floors, measured in the same run: reading the proposed agent's approved spec (one indexed
query and one decode: what any judge of it must do), and reading the 100 pending proposals
with their agents (the query re-judging starts with). Each figure is the median of a few runs;
re-judging runs in a transaction rolled back after each run, so every run writes the same.
Prints one JSON line.

Usage: python bench/judge.py [AGENTS ...]   (default 10000 100000; scratch stores: see
bench/scratch.py). BEFORE_PENDING (default 100) caps how many pending proposals the old judge
re-judges above 10,000 agents (it takes seconds each there); with fewer, its 100-proposal time
is scaled up from them and says so ("before_estimated_from").
"""

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cluster import build_cluster  # noqa: E402
from bench.scratch import setup_django  # noqa: E402

PENDING = 100
RUNS = 3


def old_judge_proposal(agent_name: str, spec: dict) -> list:
    """The judge before neighbourhoods: the whole fleet, twice, for every proposal."""
    from registry.choices import Lifecycle
    from registry.models import Agent
    from registry.toxic import paths_through, toxic_paths
    from registry.toxic_fleet import _verdict, enabled_rules

    rules = enabled_rules()
    if not rules:
        return []
    before = dict(Agent.objects.exclude(lifecycle=Lifecycle.RETIRED)
                  .filter(active_version__isnull=False)
                  .values_list("name", "active_version__spec"))
    after = {**before, agent_name: spec}
    was = {path.key for path in toxic_paths(before, rules)}
    by_name = {rule.name: rule for rule in rules}
    return [_verdict(by_name[path.rule], path)
            for path in paths_through(toxic_paths(after, rules), agent_name)
            if path.key not in was]


class OldJudge:
    """Stands in for ToxicJudge in reevaluate_pending: the old judge once per proposal."""

    def __init__(self, proposals) -> None:
        pass

    def judge(self, agent_name: str, spec: dict) -> list:
        return old_judge_proposal(agent_name, spec)


def timed(call, runs: int = RUNS, rollback: bool = False) -> tuple[float, object]:
    """Median seconds of `runs` calls (each in a transaction rolled back when asked)."""
    from django.db import transaction

    samples, result = [], None
    for _ in range(runs):
        with transaction.atomic():
            started = time.perf_counter()
            result = call()
            samples.append(time.perf_counter() - started)
            transaction.set_rollback(rollback)
    return statistics.median(samples), result


def with_email(spec: dict) -> dict:
    return {**spec, "tools": sorted({*spec["tools"], "email.send_external"})}


def fleet(agents: int, built: int) -> None:
    """Grow the scratch fleet to `agents` (100 of them with a pending proposal) and analyse."""
    from django.contrib.auth.models import User
    from django.db import connection

    from registry import actions
    from registry.choices import Role
    from registry.models import Agent, DesiredStateVersion, ToxicCombination

    build_cluster(agents - built, first=built)
    if not ToxicCombination.objects.exists():
        dana, _ = actions.create_person("bench-dana", actor="system:bench", password=None)
        actions.grant_role(dana, Role.COMPLIANCE, actor="system:bench")
        actions.create_toxic_combination(
            actor=dana, name="customers-never-email", left="data:customers_db:read",
            right="tool:email.send_external", effect="require_approvals")
        owner = User.objects.get(username="bench-owner")
        step = max(1, min(50, agents // PENDING))
        chosen = Agent.objects.filter(name__in=[f"bench-{i:05d}" for i in range(
            0, PENDING * step, step)]).select_related("active_version")
        DesiredStateVersion.objects.bulk_create(
            [DesiredStateVersion(agent=a, base_generation=1, spec=with_email(a.active_version.spec),
                                 spec_sha256="0" * 64, state="pending", source="api",
                                 proposed_by=owner, metadata=a.active_version.metadata)
             for a in chosen])
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # as autovacuum would keep it on a live server


def measure(agents: int, before_pending: int) -> dict:
    from unittest import mock

    from django.contrib.auth.models import User

    from registry.actions import proposals
    from registry.models import Agent, DesiredStateVersion
    from registry.toxic_fleet import judge_proposal

    name = "bench-00042"
    spec = with_email(Agent.objects.select_related("active_version").get(name=name)
                      .active_version.spec)
    actor = User.objects.get(username="bench-dana")
    floor_judge, _ = timed(lambda: Agent.objects.filter(name=name).values_list(
        "active_version__spec", flat=True).get())
    floor_pending, _ = timed(lambda: list(
        DesiredStateVersion.objects.filter(state="pending")
        .select_related("agent__active_version", "agent__owner")))
    after_judge, found = timed(lambda: judge_proposal(name, spec))
    before_judge, old_found = timed(lambda: old_judge_proposal(name, spec), runs=1)
    assert [r.to_dict() for r in found] == [r.to_dict() for r in old_found] and found
    after_rejudge, changed = timed(lambda: proposals.reevaluate_pending(actor=actor),
                                   rollback=True)
    pending = DesiredStateVersion.objects.filter(state="pending").count()
    assert changed == pending == PENDING, (changed, pending)

    def old_rejudge() -> int:
        pending = DesiredStateVersion.objects.filter(state="pending").order_by("pk")
        keep = set(pending.values_list("pk", flat=True)[:before_pending])
        with mock.patch.object(proposals, "ToxicJudge", OldJudge):
            pending.exclude(pk__in=keep).update(state="withdrawn")  # rolled back after
            return proposals.reevaluate_pending(actor=actor)

    before_rejudge, old_changed = timed(old_rejudge, runs=1, rollback=True)
    assert old_changed == before_pending, old_changed
    before_rejudge *= PENDING / before_pending
    return {
        "agents": agents,
        "judge_one_ms": {"before": round(before_judge * 1000, 1),
                         "after": round(after_judge * 1000, 2),
                         "floor": round(floor_judge * 1000, 2),
                         "after_vs_floor": round(after_judge / floor_judge, 1),
                         "speedup": round(before_judge / after_judge)},
        "rejudge_100_pending_s": {"before": round(before_rejudge, 2),
                                  "before_estimated_from": before_pending,
                                  "after": round(after_rejudge, 3),
                                  "floor": round(floor_pending, 4),
                                  "after_vs_floor": round(after_rejudge / floor_pending, 1),
                                  "speedup": round(before_rejudge / after_rejudge)},
    }


def main(sizes: list[int]) -> None:
    setup_django()
    before_pending = int(os.environ.get("BEFORE_PENDING", PENDING))
    results, built = [], 0
    for agents in sizes:
        fleet(agents, built)
        built = agents
        results.append(measure(agents, PENDING if agents <= 10000 else before_pending))
    load = os.getloadavg()
    print(json.dumps({"bench": "judge", "load_avg_1_5_15": [round(x, 2) for x in load],
                      "results": results}))


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [10000, 100000])
