"""The production topology across hosts: workers, web processes and the stores each on a host
of their own (Linux network namespaces, see tests/netns.py), and the network between them cut
and restored while work is under way."""

import django_rq
import pytest
from django.db import connection, connections
from rq import Worker as RQWorker

from reconciliation import actions
from reconciliation.models import Correction, Finding, ReconcileRun, SandboxAgent
from reconciliation.triggers import enqueue_reconcile
from tests.conftest import BAD_DEPLOYMENT, approved_agent, assert_trail_whole, eventually
from tests.netns import Host, HostedCluster

pytestmark = pytest.mark.netns

# A cut worker's lock lapses after LOCK_SECONDS; PostgreSQL ends a session it left inside a
# transaction (holding row locks) after IDLE_SECONDS.
HOST_SETTINGS = {"RECONCILE_LOCK_SECONDS": "5", "DATABASE_IDLE_IN_TRANSACTION_SECONDS": "10",
                 "RECONCILE_VERIFY_DELAY_SECONDS": "1"}


def until(cluster: HostedCluster, hosts: list[Host], check, what: str, timeout: float = 240):
    """`eventually`, failing with what the hosts printed."""
    try:
        return eventually(check, timeout=timeout)
    except AssertionError:
        logs = "\n".join(f"--- {host.name}:\n{cluster.output(host)}" for host in hosts)
        raise AssertionError(f"{what} within {timeout}s\n{logs}") from None


def statuses(agent) -> list[str]:
    return sorted(Finding.objects.filter(agent=agent).values_list("status", flat=True))


def waiting_on_a_row_lock(host: Host) -> bool:
    """A session of `host` waits for a row lock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                       " AND application_name = %s AND wait_event_type = 'Lock'",
                       [f"netns-{host.name}"])
        return cursor.fetchone()[0] > 0


def idle(host: Host) -> bool:
    """The RQ worker on `host` is registered and runs no job."""
    workers = RQWorker.all(connection=django_rq.get_connection("reconcile"))
    return any(w.pid == host.processes[0].pid and w.get_state() == "idle" for w in workers)


@pytest.mark.timeout(900)
def test_a_worker_cut_off_mid_pass_loses_its_lock_and_another_finishes_the_pass_once(
        people, hosted_cluster):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    actions.ensure_sandbox(agent)
    actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                           reason="a deployment quietly widened access")
    # The platform's row is held, so the first worker's pass stops at its first change:
    # mid-pass, its findings recorded, inside a transaction of its own on the platform's row.
    holder = connections.create_connection("default")
    holder.set_autocommit(False)
    with holder.cursor() as cursor:
        cursor.execute("SELECT 1 FROM reconciliation_sandboxagent WHERE agent_id = %s "
                       "FOR UPDATE", [agent.pk])
    first = hosted_cluster.worker("worker-1", **HOST_SETTINGS)
    try:
        until(hosted_cluster, [first], lambda: waiting_on_a_row_lock(first),
              "the pass never reached its first change", timeout=120)
        hosted_cluster.network.cut(first)
    finally:
        holder.commit()  # the cut worker's session takes the row, and cannot be told
        holder.close()
    assert len(statuses(agent)) == 3 and SandboxAgent.objects.get(agent=agent).apply_count == 0

    second = hosted_cluster.worker("worker-2", **HOST_SETTINGS)
    enqueue_reconcile(agent.pk, "manual")  # the next trigger (a resync, an observation)
    until(hosted_cluster, [first, second], lambda: statuses(agent) == ["corrected"] * 3,
          "the pass was not finished by another worker")
    assert ReconcileRun.objects.filter(agent=agent, trigger="manual", result="corrected").exists()
    assert SandboxAgent.objects.get(agent=agent).apply_count == 3

    hosted_cluster.network.restore(first)  # the cut worker comes back, mid-pass
    until(hosted_cluster, [first], lambda: idle(first),
          "the worker that was cut off did not come back", timeout=300)
    assert statuses(agent) == ["corrected"] * 3
    assert SandboxAgent.objects.get(agent=agent).apply_count == 3  # nothing applied twice

    # And it works again, alone.
    hosted_cluster.network.stop_processes(second)
    actions.sandbox_deploy(agent, actor="system:test", changes={"model": "gpt-3.5-turbo"},
                           reason="drift again, with only the worker that was cut off")
    enqueue_reconcile(agent.pk, "manual")
    until(hosted_cluster, [first], lambda: statuses(agent) == ["corrected"] * 4,
          "the worker that was cut off does not correct drift again")
    sandbox = SandboxAgent.objects.get(agent=agent)
    assert sandbox.apply_count == 4 and len(set(sandbox.applied_keys)) == 4  # none twice
    assert list(Correction.objects.filter(agent=agent).values_list("result", flat=True)) == [
        "verified"] * 4
    assert_trail_whole()
