"""The periodic resync is the safety net under the timed passes: when the pass a grant's end or
a waiver's lapse asked for is lost (Redis down when the pass asked for it, or the scheduled job
deleted), or the pass a waiver or a shadow asked for when it began was lost, the first resync
after that moment finds the agent (`needing_pass`) and its pass enforces it."""

from datetime import timedelta

import django_rq
import pytest
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisDown
from rq.registry import ScheduledJobRegistry

from audit.models import AuditEntry
from reconciliation import jobs
from reconciliation.controller import work_queue
from reconciliation.models import AgentStatus
from reconciliation.resync_query import needing_pass, reconcilable
from registry import actions as registry_actions
from registry.models import Waiver
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import approved_agent, eventually, shadow_on

CRM = ["crm.search", "orders.lookup", "payments.refund"]  # one tool more than approved


def run_queued(agent, trigger: str) -> str:
    queue = django_rq.get_queue("reconcile")
    (job,) = [job for job in queue.get_jobs() if job.args == (agent.pk, trigger)]
    return job.perform()


def lose_the_timed_pass(how: str, monkeypatch, agent, trigger: str) -> None:
    """Run the queued pass `trigger`, losing the timed pass it asks for."""
    queue = django_rq.get_queue("reconcile")
    scheduled = ScheduledJobRegistry(queue=queue)
    if how == "redis down at the requeue":
        def down(*args, **kwargs):
            raise RedisDown("Connection refused")

        with monkeypatch.context() as patch:
            patch.setattr(work_queue, "claim_requeue", down)
            run_queued(agent, trigger)
        assert scheduled.get_job_ids() == []
    else:
        run_queued(agent, trigger)
        (job_id,) = scheduled.get_job_ids()  # the pass asked for it; it is deleted
        queue.fetch_job(job_id).delete()


def needs_pass(agent, now=None) -> bool:
    return agent.pk in needing_pass(reconcilable(), now or timezone.now())


def resync_runs_its_pass(agent) -> None:
    """The resync's batch over this agent queues its pass, and the pass runs."""
    assert jobs.resync_range(agent.pk, agent.pk) == {"needs_pass": 1, "queued": 1}
    run_queued(agent, "resync")


def platform(agent) -> dict:
    return SandboxAgent.objects.get(agent=agent).state


LOST = ["redis down at the requeue", "the scheduled job deleted"]


@pytest.mark.parametrize("how", LOST)
def test_a_grant_whose_timed_pass_was_lost_is_revoked_by_the_resync(
        transactional_db, people, redis_client, monkeypatch, how):
    expires = (timezone.now() + timedelta(seconds=6)).replace(microsecond=0)
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"}, grants=[
        {"resource": "crm", "access": "read", "reason": "audit",
         "expires_at": expires.isoformat().replace("+00:00", "Z")}])
    lose_the_timed_pass(how, monkeypatch, agent, "approved")
    assert {"resource": "crm", "access": "read"} in platform(agent)["data"]
    # converged and in sync: the resync leaves it alone until the grant's end ...
    assert not needs_pass(agent, expires - timedelta(seconds=1))
    # ... and from then on finds it, with no timed pass
    eventually(lambda: needs_pass(agent), timeout=60,
               message=lambda: f"not found after {expires}: {timezone.now()}")
    resync_runs_its_pass(agent)
    assert all(d["resource"] != "crm" for d in platform(agent)["data"])
    assert not needs_pass(agent)


@pytest.mark.parametrize("how", LOST)
def test_a_waiver_whose_lapse_pass_was_lost_is_enforced_by_the_resync(
        transactional_db, people, redis_client, monkeypatch, how):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    run_queued(agent, "approved")
    waiver = registry_actions.grant_waiver(
        agent.name, pointer="/tools/crm.search", reason="migration", ticket="CHG-1",
        duration="6s", actor=people.dana)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes={"tools": CRM},
                                   reason="hotfix")  # collapses into the waiver's pass
    lose_the_timed_pass(how, monkeypatch, agent, "waiver_granted")
    assert "crm.search" in platform(agent)["tools"]  # waived
    eventually(lambda: timezone.now() > waiver.expires_at and needs_pass(agent), timeout=60,
               message=lambda: f"not found after {waiver.expires_at}: {timezone.now()}")
    resync_runs_its_pass(agent)
    assert "crm.search" not in platform(agent)["tools"]
    entry = AuditEntry.objects.get(action="waiver.lapsed")
    assert entry.target == f"waiver:{waiver.pk}"


def test_a_waiver_whose_own_pass_was_lost_still_lapses_on_the_record(
        transactional_db, people, redis_client):
    """Redis lost the pass the waiver asked for when it began: no pass saw it, yet once it
    ends the resync's pass records the lapse."""
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    run_queued(agent, "approved")
    waiver = registry_actions.grant_waiver(
        agent.name, pointer="/tools/crm.search", reason="migration", ticket="CHG-1",
        duration="3s", actor=people.dana)
    redis_client.flushdb()  # its pass is gone
    assert not needs_pass(agent, waiver.expires_at - timedelta(seconds=1))
    assert needs_pass(agent, waiver.expires_at)
    eventually(lambda: needs_pass(agent), timeout=60)
    resync_runs_its_pass(agent)
    assert Waiver.objects.get(pk=waiver.pk).lapsed_at is not None
    assert AuditEntry.objects.filter(action="waiver.lapsed").count() == 1
    assert not needs_pass(agent)


def test_a_shadow_whose_own_pass_was_lost_still_ends_on_time(
        transactional_db, people, redis_client):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    run_queued(agent, "approved")
    shadow_on(people, agent, duration="3s")
    redis_client.flushdb()  # its pass is gone
    until = AgentStatus.objects.get(agent=agent).shadow_until
    assert not needs_pass(agent, until - timedelta(seconds=1))
    assert needs_pass(agent, until)
    eventually(lambda: needs_pass(agent), timeout=60)
    resync_runs_its_pass(agent)
    status = AgentStatus.objects.get(agent=agent)
    assert (status.shadow, status.shadow_until) == (False, None)
    assert AuditEntry.objects.filter(action="shadow.expired").count() == 1
