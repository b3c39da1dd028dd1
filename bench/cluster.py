"""Building a converged cluster of sandbox agents fast (bulk inserts), and real workers."""

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build_cluster(count: int, connector: str = "sandbox", first: int = 0) -> list[int]:
    """`count` approved, converged agents owned by one owner on the sandbox connector (the
    simulated platform holds their state) or on push (each has reported its approved state);
    returns their ids."""
    import yaml
    from django.contrib.auth.models import User
    from django.utils import timezone

    from reconciliation.actions import state_hash
    from reconciliation.models import AgentStatus, ObservedState
    from registry.manifest import validate_manifest
    from registry.models import Agent, DesiredStateVersion, MeetingPoint
    from registry.toxic import meeting_points
    from sandbox.models import SandboxAgent

    owner, _ = User.objects.get_or_create(username="bench-owner")
    document = yaml.safe_load((ROOT / "examples" / "manifests" / "refund-agent.yaml").read_text())
    document["spec"]["enforcement"] = {"default": "correct"}
    document["spec"]["connector"] = {"type": connector}
    document["spec"]["data"].append({"resource": "customers_db", "access": "read"})
    manifest = validate_manifest(document)
    state = {k: v for k, v in manifest.spec.items() if k != "enforcement"}
    state["running"] = True
    now = timezone.now()
    agents = Agent.objects.bulk_create(
        [Agent(name=f"bench-{i:05d}", owner=owner, framework="langgraph",
               connector=manifest.spec["connector"], generation=1)
         for i in range(first, first + count)],
        batch_size=2000)
    versions = DesiredStateVersion.objects.bulk_create(
        [DesiredStateVersion(agent=a, generation=1, base_generation=0, spec=manifest.spec,
                             spec_sha256=manifest.spec_sha256, state="approved", source="yaml",
                             metadata={"owner": owner.username}) for a in agents],
        batch_size=2000)
    for agent, version in zip(agents, versions, strict=True):
        agent.active_version = version
    Agent.objects.bulk_update(agents, ["active_version"], batch_size=2000)
    MeetingPoint.objects.bulk_create(  # what approval records (registry/toxic_fleet.py)
        [MeetingPoint(agent=a, point=point) for a in agents
         for point in meeting_points(a.name, manifest.spec)], batch_size=5000)
    digest = state_hash(state)  # what a converging pass records (bulk_create skips save())
    AgentStatus.objects.bulk_create(
        [AgentStatus(agent=a, converged=True, converged_generation=1, observed_generation=1,
                     last_reconciled_at=now, in_sync_version=a.active_version_id,
                     in_sync_observed_sha256=digest) for a in agents], batch_size=2000)
    if connector == "sandbox":
        SandboxAgent.objects.bulk_create(
            [SandboxAgent(agent=a, state=state, state_sha256=digest) for a in agents],
            batch_size=2000)
    else:
        ObservedState.objects.bulk_create(
            [ObservedState(agent=a, state=state, state_sha256=state_hash(state), source="push",
                           reported_by=f"agent:{a.name}", observed_at=now, last_seen_at=now)
             for a in agents], batch_size=2000)
    return [a.pk for a in agents]


def build_open_work(agent_ids: list[int], every: int = 100) -> int:
    """Work waiting for people on one agent in `every` (bulk, like build_cluster): an escalated
    finding with its open escalation, and a pending proposal from its owner, so the inboxes,
    findings and proposals lists have rows to page through. Returns how many agents got it."""
    from reconciliation.models import Escalation, Finding
    from registry.models import Agent, DesiredStateVersion

    chosen = list(Agent.objects.filter(pk__in=agent_ids[::every])
                  .select_related("active_version", "owner"))
    findings = Finding.objects.bulk_create(
        [Finding(agent=a, fingerprint=f"bench-{a.pk}", kind="tool_added",
                 pointer="/tools/crm.search", actual="crm.search", severity="high",
                 area="tools", operation={"op": "remove_tool", "target": "crm.search"},
                 status="escalated", generation=1, cause_key="unknown") for a in chosen],
        batch_size=2000)
    Escalation.objects.bulk_create(
        [Escalation(agent=f.agent, finding=f, reason="write access to crm needs a person")
         for f in findings], batch_size=2000)
    DesiredStateVersion.objects.bulk_create(
        [DesiredStateVersion(agent=a, base_generation=1, spec=a.active_version.spec,
                             spec_sha256=a.active_version.spec_sha256, state="pending",
                             source="api", proposed_by=a.owner,
                             metadata=a.active_version.metadata, comment="bench proposal")
         for a in chosen], batch_size=2000)
    return len(chosen)


class Processes:
    """A group of the bench's own server processes, stopped together."""

    processes: list[subprocess.Popen]

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(timeout=30)


class Workers(Processes):
    """`count` real RQ worker processes (with the scheduler) on the bench's stores, of the
    production worker class (`RQ["WORKER_CLASS"]`: jobs run in the worker's own process)."""

    def __init__(self, count: int, queues: tuple[str, ...] = ("reconcile",)) -> None:
        self.processes = [
            subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "rqworker", *queues,
                              "--with-scheduler"], cwd=ROOT, env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(count)]

    def wait_ready(self, timeout: float = 60) -> None:
        """Until every worker has registered with Redis."""
        import django_rq
        from rq import Worker

        deadline = time.monotonic() + timeout
        connection = django_rq.get_connection("reconcile")
        while len(Worker.all(connection=connection)) < len(self.processes):
            if time.monotonic() > deadline:
                raise SystemExit("workers did not start")
            time.sleep(0.1)


def build_audit_rows(total: int, agent_names: list[str] | None = None) -> None:
    """Extend the audit chain to `total` entries with valid hashes and their stored Merkle tree,
    as the sequencer would place them (COPY on PostgreSQL, bulk inserts elsewhere)."""
    from agentgov import merkle
    from django.db import connection, transaction
    from django.utils import timezone

    from audit import tree
    from audit.chain import chain_hash, entry_payload, format_time, leaf_bytes
    from audit.models import AuditChainHead, AuditEntry, AuditTreeNode

    head = AuditChainHead.objects.get(pk=1)
    seq, previous = head.seq, head.hash
    names = agent_names or ["refund-agent"]
    stored = tree.load(tree.frontier_nodes(seq))
    frontier = {level: stored[(level, index)] for level, index in tree.frontier_nodes(seq)}
    with transaction.atomic():
        for first in range(seq, total, 20000):  # a batch at a time: memory stays flat
            size, leaves, rows = seq, [], []
            for i in range(first, min(first + 20000, total)):
                seq += 1
                fields = {"seq": seq, "at": timezone.now(), "actor": "system:bench",
                          "action": "role.granted", "target": f"bench:{i}",
                          "agent": names[i % len(names)], "before": {"roles": []},
                          "after": {"roles": ["owner"], "i": i}, "reason": "",
                          "request_id": "", "prev_hash": previous}
                payload = entry_payload({**fields, "at": format_time(fields["at"])})
                previous = chain_hash(payload, previous)
                leaves.append(merkle.leaf_hash(leaf_bytes(payload, previous)))
                rows.append({**fields, "hash": previous, "canonical": payload})
            nodes = tree.grow(size, frontier, leaves)
            if connection.vendor == "postgresql":
                _copy_audit_rows(rows, nodes)
            else:
                AuditEntry.objects.bulk_create([AuditEntry(**row) for row in rows])
                AuditTreeNode.objects.bulk_create(
                    [AuditTreeNode(position=p, hash=h) for p, h in nodes])
        AuditChainHead.objects.filter(pk=1).update(seq=seq, hash=previous)


def _copy_audit_rows(rows: list[dict], nodes: list[tuple[int, str]]) -> None:
    import json

    from django.db import connection

    columns = ("seq", "at", "actor", "action", "target", "agent", "before", "after", "reason",
               "request_id", "prev_hash", "hash", "canonical")
    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg's own, for COPY
        with raw.copy(f"COPY audit_auditentry ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row([json.dumps(row[c]) if c in ("before", "after") else row[c]
                                for c in columns])
        with raw.copy("COPY audit_audittreenode (position, hash) FROM STDIN") as copy:
            for node in nodes:
                copy.write_row(node)
