"""The loop on real RQ workers, real Redis and the real database: the refund-agent story end
to end, triggers collapsing, backoff after failures, and a dead worker's lock expiring."""

import django_rq
import pytest

from audit.verify import verify_trail
from reconciliation.controller.triggers import enqueue_reconcile
from reconciliation.controller.work_queue import LOCK_KEY, QUEUED_KEY
from reconciliation.models import Finding, ReconcileRun
from registry import actions as registry_actions
from registry.models import Agent
from sandbox import actions
from sandbox.models import SandboxAgent
from tests.conftest import BAD_DEPLOYMENT, assert_trail_whole, eventually, refund_manifest

pytestmark = pytest.mark.long(minutes=1)


def register_and_approve(people) -> Agent:
    (outcome,) = registry_actions.apply_manifests(
        [refund_manifest(enforcement={"default": "correct"})], actor=people.alice,
        source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)  # queues a pass
    return Agent.objects.get(name="refund-agent")


def sandbox_state(agent):
    row = SandboxAgent.objects.filter(agent=agent).first()
    return row.state if row else None


def all_corrected(agent) -> bool:
    statuses = set(Finding.objects.filter(agent=agent).values_list("status", flat=True))
    return statuses == {"corrected"}


def test_the_refund_agent_story_on_a_real_worker(people, start_worker):
    worker = start_worker()
    agent = register_and_approve(people)
    eventually(lambda: ReconcileRun.objects.filter(agent=agent, result="converged").exists(),
               message=lambda: f"no converged pass; worker said:\n{worker.output()}")
    actions.sandbox_deploy(agent, actor="system:deploy-bot", changes=BAD_DEPLOYMENT,
                           reason="a deployment quietly widened access")
    eventually(lambda: all_corrected(agent) and Finding.objects.filter(agent=agent).count() == 3,
               message=lambda: f"drift not corrected; worker said:\n{worker.output()}")
    state = sandbox_state(agent)
    assert "crm.search" not in state["tools"]
    assert all(d["resource"] != "crm" for d in state["data"])
    assert state["actions"]["payments.refund"]["approval_above"] == 500
    # the pass records its run when it settles, after the corrections it counts
    run = eventually(lambda: ReconcileRun.objects.filter(agent=agent, result="corrected").first(),
                     message=lambda: f"no corrected run; worker said:\n{worker.output()}")
    assert (run.generation, run.drift_found, len(run.changes)) == (1, 3, 3)
    assert ReconcileRun.objects.filter(agent=agent, result="corrected").count() == 1
    assert SandboxAgent.objects.get(agent=agent).apply_count == 3
    assert verify_trail().ok


def test_triggers_for_an_agent_already_queued_collapse_into_one_pass(transactional_db, people,
                                                                   redis_client):
    agent = register_and_approve(people)  # the approval already queued one pass
    assert [enqueue_reconcile(agent.pk, "manual") for _ in range(5)] == [False] * 5
    assert django_rq.get_queue("reconcile").count == 1


def test_triggers_arriving_while_a_pass_runs_collapse_into_one_pass_after_it(
        transactional_db, people, redis_client):
    from rq.registry import ScheduledJobRegistry


    agent = register_and_approve(people)
    queue = django_rq.get_queue("reconcile")
    queue.empty()
    redis_client.delete(QUEUED_KEY.format(agent_id=agent.pk))
    redis_client.set(LOCK_KEY.format(agent_id=agent.pk), "another worker's pass", ex=60)
    assert [enqueue_reconcile(agent.pk, "observation") for _ in range(5)] == [
        True, False, False, False, False]
    (waiting,) = queue.get_jobs()
    # The waiting job finds the pass still running: it comes back later and keeps its place.
    assert waiting.perform() == "busy"
    assert enqueue_reconcile(agent.pk, "finding") is False
    scheduled = ScheduledJobRegistry(queue=queue)
    (again_id,) = scheduled.get_job_ids()
    assert queue.count == 1 and not ReconcileRun.objects.filter(trigger="observation").exists()
    redis_client.delete(LOCK_KEY.format(agent_id=agent.pk))  # the running pass ends
    queue.fetch_job(again_id).perform()
    assert ReconcileRun.objects.filter(agent=agent, trigger="observation").count() == 1
    # Once the collapsed pass has started, a new trigger queues a new pass.
    assert enqueue_reconcile(agent.pk, "observation") is True


def test_a_trigger_arriving_during_a_pass_is_run_by_its_holder_right_after_it(
        transactional_db, people, redis_client, monkeypatch):
    from reconciliation.controller import handler

    agent = register_and_approve(people)
    queue = django_rq.get_queue("reconcile")
    (approved,) = queue.get_jobs()
    real_pass = handler.passes.reconcile
    arrived = []

    def pass_while_the_agent_reports(agent_id, *, trigger, **kwargs):
        if not arrived:  # the agent reports a new state while the first pass runs
            arrived.append(enqueue_reconcile(agent_id, "observation"))
        return real_pass(agent_id, trigger=trigger, **kwargs)

    monkeypatch.setattr(handler.passes, "reconcile", pass_while_the_agent_reports)
    approved.perform()
    assert arrived == [True]
    triggers = list(ReconcileRun.objects.filter(agent=agent).order_by("pk")
                    .values_list("trigger", flat=True))
    assert triggers == ["approved", "observation"]  # back to back, no wait for the lock
    (waiting,) = [job for job in queue.get_jobs() if job.args == (agent.pk, "observation")
                  and job.kwargs.get("queued")]
    assert waiting.perform() == "collapsed"  # its pass was done: it does not run another
    assert ReconcileRun.objects.filter(agent=agent).count() == 2
    assert enqueue_reconcile(agent.pk, "observation") is True  # later triggers queue again


def test_a_long_pass_keeps_its_lock_and_a_dead_one_lets_it_lapse(redis_client):
    import time

    from reconciliation.controller.work_queue import LockRenewal

    # Renewed every third of its life: 2 s, so a thread a loaded machine runs late still
    # renews in time.
    life = 6
    key = "reconcile:lock:test-renewal"
    redis_client.set(key, "mine", ex=life)
    with LockRenewal(redis_client, key, "mine", life) as renewal:
        held_until = time.monotonic() + 2 * life + 1  # over twice the lock's life
        while time.monotonic() < held_until:
            assert redis_client.get(key) == b"mine" and not renewal.lost
            time.sleep(0.5)
    eventually(lambda: not redis_client.exists(key), timeout=5 * life,
               message="nobody renews the lock any more, yet it never lapsed")
    redis_client.set(key, "someone else's", ex=60)  # lost while running: never extended
    with LockRenewal(redis_client, key, "mine", 1) as renewal:
        eventually(lambda: renewal.lost, timeout=60, message="the loss was never noticed")
    assert redis_client.get(key) == b"someone else's" and redis_client.ttl(key) <= 60


def test_a_failing_platform_is_retried_with_backoff_until_it_converges(people, start_worker):
    agent = register_and_approve(people)
    actions.ensure_sandbox(agent)
    actions.sandbox_faults(agent, actor="system:test", fault="fail", after_changes=1)
    actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    worker = start_worker()

    def runs() -> list[tuple[str, str]]:
        return list(ReconcileRun.objects.filter(agent=agent).order_by("pk")
                    .values_list("result", "trigger"))

    def finished_after_the_failure() -> bool:
        """Every finding corrected, and the pass that corrected them recorded (its run row is
        written as it settles, after the corrections it counts): a pass after the failed one
        finished the work, the backoff's retry, or on a loaded machine another trigger for
        the same agent that came first (it collapses with the retry)."""
        results = runs()
        failed = next((i for i, run in enumerate(results)
                       if run in (("failed", "observation"), ("failed", "approved"))), None)
        return all_corrected(agent) and failed is not None and bool(results[failed + 1:])

    eventually(finished_after_the_failure, timeout=40,
               message=lambda: f"not corrected after retries (passes {runs()}); worker said:\n"
                               f"{worker.output()}")
    assert SandboxAgent.objects.get(agent=agent).apply_count == 3


@pytest.mark.parametrize("after_changes", [1, 2])
def test_a_worker_killed_mid_correction_leaves_a_lock_that_expires_and_the_work_finishes(
        people, start_worker, redis_client, after_changes):
    agent = register_and_approve(people)
    actions.ensure_sandbox(agent)
    actions.sandbox_faults(agent, actor="system:test", fault="crash",
                           after_changes=after_changes)
    actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    worker = start_worker(SANDBOX_CRASH_KILLS_PROCESS="true", RECONCILE_LOCK_SECONDS="5")
    eventually(lambda: SandboxAgent.objects.get(agent=agent).apply_count == after_changes and
               not SandboxAgent.objects.get(agent=agent).fault, timeout=40,
               message=lambda: f"the crash never happened; worker said:\n{worker.output()}")
    # Jobs run in the worker's own process: the crash killed the worker, as supervisord sees
    # it, and a new one is started. The dead one never released its lock (it may have lapsed
    # already on a busy machine): a new trigger waits for it to expire, then finishes the work.
    eventually(lambda: worker.process.poll() is not None, timeout=40)
    worker = start_worker(RECONCILE_LOCK_SECONDS="5")
    enqueue_reconcile(agent.pk, "manual")
    eventually(lambda: all_corrected(agent), timeout=40,
               message=lambda: f"not finished after the lock expired; worker said:\n"
                               f"{worker.output()}")
    assert SandboxAgent.objects.get(agent=agent).apply_count == 3  # nothing applied twice
    assert_trail_whole()  # the killed work-horse's open transaction left no broken seq


@pytest.fixture(autouse=True)
def _quick_verification(settings):
    settings.RECONCILE_VERIFY_DELAY_SECONDS = 1


def approve_a_grant_and_run_its_pass(people, expires_at: str):
    """Approve the refund agent with a grant ending at `expires_at` and run the pass the
    approval queued (no worker): that pass, not the approval, asks for the timed one."""
    manifest = refund_manifest(grants=[{"resource": "crm", "access": "read", "reason": "audit",
                                        "expires_at": expires_at}])
    (outcome,) = registry_actions.apply_manifests([manifest], actor=people.alice, source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    queue = django_rq.get_queue("reconcile")
    (approved,) = queue.get_jobs()
    assert approved.args[1] == "approved"
    assert approved.perform() == "converged"
    return queue


def test_approving_a_grant_schedules_a_pass_at_its_exact_expiry(transactional_db, people,
                                                               redis_client):
    from datetime import UTC, datetime

    from rq.registry import ScheduledJobRegistry

    queue = approve_a_grant_and_run_its_pass(people, "2030-01-02T03:04:05Z")
    registry = ScheduledJobRegistry(queue=queue)
    (job_id,) = registry.get_job_ids()
    job = queue.fetch_job(job_id)
    assert job.args[1] == "grant_expired"
    assert registry.get_scheduled_time(job) == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    # Passes before it ask for the same moment: it stays the one pass waiting.
    enqueue_reconcile(Agent.objects.get(name="refund-agent").pk, "manual")
    (again,) = [job for job in queue.get_jobs() if job.args[1] == "manual"]
    assert again.perform() == "converged"
    assert registry.get_job_ids() == [job_id]


def test_a_grant_expiring_within_a_second_is_not_revisited_before_it_expires(
        transactional_db, people, redis_client):
    # RQ's scheduler truncates to whole seconds: 03:04:05.250 must not run at 03:04:05.
    from datetime import UTC, datetime

    from rq.registry import ScheduledJobRegistry

    queue = approve_a_grant_and_run_its_pass(people, "2030-01-02T03:04:05.250Z")
    registry = ScheduledJobRegistry(queue=queue)
    (job_id,) = registry.get_job_ids()
    assert registry.get_scheduled_time(job_id) == datetime(2030, 1, 2, 3, 4, 6, tzinfo=UTC)


def test_a_grant_is_revoked_by_a_worker_at_its_expiry_without_a_new_proposal(people,
                                                                            start_worker):
    from datetime import timedelta

    from django.utils import timezone
    from rq import Worker

    worker = start_worker()
    # The grant must outlive the first pass: on a busy machine a worker takes seconds to start.
    eventually(lambda: Worker.all(connection=django_rq.get_connection("reconcile")),
               timeout=60, message=worker.output())
    expires = (timezone.now() + timedelta(seconds=10)).isoformat().replace("+00:00", "Z")
    (outcome,) = registry_actions.apply_manifests(
        [refund_manifest(enforcement={"default": "correct"}, grants=[
            {"resource": "crm", "access": "read", "reason": "Q4 audit", "expires_at": expires}])],
        actor=people.alice, source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    agent = Agent.objects.get(name="refund-agent")
    actions.ensure_sandbox(agent)  # the platform deploys it as approved, grant included
    eventually(lambda: ReconcileRun.objects.filter(agent=agent, result="converged").exists(),
               message=worker.output())
    assert {"resource": "crm", "access": "read"} in sandbox_state(agent)["data"]
    run = eventually(
        lambda: ReconcileRun.objects.filter(agent=agent, trigger="grant_expired").first(),
        timeout=30, message=lambda: f"no pass at the expiry; worker said:\n{worker.output()}")
    assert all(d["resource"] != "crm" for d in sandbox_state(agent)["data"])
    assert [c["op"] for c in run.changes] == ["remove_data"]
    assert agent.versions.count() == 1  # no new proposal was needed
