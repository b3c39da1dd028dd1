"""When a pass says the next one must run (`requeue_after` and its trigger), from every timed
thing it judges: a grant's end (in the spec or on the platform), a waiver's lapse, a shadow's
end, the end of a maintenance window that held its corrections, a correction to verify. A
change asks for a pass now and schedules nothing itself; that pass asks for the timed one."""

from datetime import UTC, datetime, timedelta

import django_rq
import pytest
from django.utils import timezone
from rq.registry import ScheduledJobRegistry

from compliance import actions as compliance_actions
from config.times import parse_timestamp
from reconciliation.controller.triggers import enqueue_reconcile
from reconciliation.models import AgentStatus
from reconciliation.reconciler.passes import reconcile
from reconciliation.reconciler.settle import next_pass
from registry import actions as registry_actions
from sandbox import actions as sandbox_actions
from tests.conftest import approved_agent, shadow_on

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
CRM = ["crm.search", "orders.lookup", "payments.refund"]  # one tool more than approved


def grant(resource: str, expires: datetime) -> dict:
    return {"resource": resource, "access": "read", "reason": "audit",
            "expires_at": expires.isoformat().replace("+00:00", "Z")}


def window_for_an_hour(people, **extra):
    """dana's maintenance window over every agent, from a second ago for an hour."""
    start = timezone.now()
    return compliance_actions.schedule_window(
        actor=people.dana, starts_at=(start - timedelta(seconds=1)).isoformat(),
        ends_at=(start + timedelta(hours=1)).isoformat(), reason="database upgrade",
        selector={}, **extra)


# --- the pure rule ----------------------------------------------------------------------------


def test_nothing_timed_means_no_requeue():
    assert next_pass(NOW, spec={"grants": []}, observed={}) is None
    # what has already ended is the pass's own business, not a reason to come back
    assert next_pass(NOW, spec={"grants": [grant("crm", NOW)]}, observed=None,
                     waivers_end=[NOW - timedelta(seconds=1)], shadow_until=NOW,
                     held_until=NOW - timedelta(hours=1)) is None


def test_the_soonest_grant_end_in_the_spec_or_on_the_platform():
    spec = {"grants": [grant("crm", NOW + timedelta(hours=3)),
                       grant("orders_db", NOW + timedelta(hours=2))]}
    assert next_pass(NOW, spec=spec, observed=None) == (NOW + timedelta(hours=2),
                                                        "grant_expired")
    # the platform's own grant ends sooner: from then its access is an expired grant's
    observed = {"grants": [grant("crm", NOW + timedelta(minutes=5))]}
    assert next_pass(NOW, spec=spec, observed=observed) == (NOW + timedelta(minutes=5),
                                                            "grant_expired")


@pytest.mark.parametrize("soonest, trigger", [
    ("waiver", "waiver_lapsed"), ("shadow", "shadow_expired"), ("window", "window_ended"),
    ("grant", "grant_expired")])
def test_the_soonest_timed_thing_wins_with_its_own_trigger(soonest, trigger):
    later = {name: NOW + timedelta(hours=index + 1)
             for index, name in enumerate(("waiver", "shadow", "window", "grant"))}
    later[soonest] = NOW + timedelta(seconds=90)
    got = next_pass(NOW, spec={"grants": [grant("crm", later["grant"])]}, observed={},
                    waivers_end=[later["waiver"], NOW + timedelta(days=2)],
                    shadow_until=later["shadow"], held_until=later["window"])
    assert got == (NOW + timedelta(seconds=90), trigger)


def test_a_correction_to_verify_comes_before_anything_later():
    got = next_pass(NOW, spec={"grants": [grant("crm", NOW + timedelta(hours=1))]},
                    observed={}, waivers_end=[NOW + timedelta(minutes=1)],
                    verify_in=timedelta(seconds=5))
    assert got == (NOW + timedelta(seconds=5), "verify")
    # a waiver lapsing before the verification delay is due first
    got = next_pass(NOW, spec={}, observed={}, waivers_end=[NOW + timedelta(seconds=2)],
                    verify_in=timedelta(seconds=5))
    assert got == (NOW + timedelta(seconds=2), "waiver_lapsed")


# --- the settle stage's result, through a whole pass -------------------------------------------


@pytest.mark.django_db
def test_a_waived_drift_comes_back_at_the_waivers_lapse(people):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"},
                           grants=[grant("crm", timezone.now() + timedelta(days=2))])
    reconcile(agent.pk, trigger="approved")
    waiver = registry_actions.grant_waiver(
        agent.name, pointer="/tools/crm.search", reason="migration", ticket="CHG-1",
        duration="1h", actor=people.dana)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes={"tools": CRM},
                                   reason="hotfix")
    now = timezone.now()
    result = reconcile(agent.pk, trigger="observation", now=now)
    assert result.run.changes == []  # allowed while the waiver is in force
    assert (result.requeue_after, result.requeue_trigger) == (waiver.expires_at - now,
                                                              "waiver_lapsed")


@pytest.mark.django_db
def test_a_shadow_comes_back_at_its_end(people):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    reconcile(agent.pk, trigger="approved")
    shadow_on(people, agent, duration="2h")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes={"tools": CRM},
                                   reason="hotfix")
    now = timezone.now()
    result = reconcile(agent.pk, trigger="observation", now=now)
    assert result.run.changes == [] and result.run.shadow
    until = AgentStatus.objects.get(agent=agent).shadow_until
    assert (result.requeue_after, result.requeue_trigger) == (until - now, "shadow_expired")


@pytest.mark.django_db
def test_corrections_a_maintenance_window_held_come_back_at_its_end(people):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"},
                           grants=[grant("crm", timezone.now() + timedelta(days=2))])
    reconcile(agent.pk, trigger="approved")
    window = window_for_an_hour(people)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes={"tools": CRM},
                                   reason="hotfix")
    now = timezone.now()
    held = reconcile(agent.pk, trigger="observation", now=now)
    assert held.run.result == "drifted" and held.run.changes == []
    assert (held.requeue_after, held.requeue_trigger) == (window.ends_at - now, "window_ended")
    # at its end the held correction runs, and the grant's end is what is left to wait for
    after = window.ends_at + timedelta(seconds=1)
    ended = reconcile(agent.pk, trigger="window_ended", now=after)
    assert [(c["op"], c["target"]) for c in ended.run.changes] == [("remove_tool", "crm.search")]
    expires = parse_timestamp(agent.active_version.spec["grants"][0]["expires_at"])
    assert (ended.requeue_after, ended.requeue_trigger) == (expires - after, "grant_expired")


@pytest.mark.django_db
def test_a_window_that_holds_nothing_adds_no_requeue(people):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    reconcile(agent.pk, trigger="approved")
    window_for_an_hour(people, allowed=["remove_tool"])
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes={"tools": CRM},
                                   reason="hotfix")
    result = reconcile(agent.pk, trigger="observation")
    assert result.run.result == "corrected"
    assert result.requeue_after is None


# --- a change asks for a pass now; that pass asks for the timed one --------------------------


def scheduled(queue) -> list[tuple[datetime, tuple]]:
    registry = ScheduledJobRegistry(queue=queue)
    return [(registry.get_scheduled_time(job_id), queue.fetch_job(job_id).args)
            for job_id in registry.get_job_ids()]


def queued_pass(queue, agent, trigger: str):
    (job,) = [job for job in queue.get_jobs() if job.args == (agent.pk, trigger)]
    return job


def whole_second_after(moment: datetime) -> datetime:
    return moment.replace(microsecond=0) + timedelta(seconds=1 if moment.microsecond else 0)


def test_a_waiver_asks_for_a_pass_now_and_that_pass_for_the_one_at_its_lapse(
        transactional_db, people, redis_client):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    queue = django_rq.get_queue("reconcile")
    assert queued_pass(queue, agent, "approved").perform() == "converged"
    assert scheduled(queue) == []
    waiver = registry_actions.grant_waiver(
        agent.name, pointer="/tools/crm.search", reason="migration", ticket="CHG-1",
        duration="1h", actor=people.dana)
    assert scheduled(queue) == []  # the change schedules nothing later by itself
    assert queued_pass(queue, agent, "waiver_granted").perform() == "converged"
    assert scheduled(queue) == [(whole_second_after(waiver.expires_at),
                                 (agent.pk, "waiver_lapsed"))]


def test_a_shadow_asks_for_a_pass_now_and_that_pass_for_the_one_at_its_end(
        transactional_db, people, redis_client):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    queue = django_rq.get_queue("reconcile")
    assert queued_pass(queue, agent, "approved").perform() == "converged"
    shadow_on(people, agent, duration="2h")
    assert scheduled(queue) == []
    assert queued_pass(queue, agent, "shadow_started").perform() == "converged"
    until = AgentStatus.objects.get(agent=agent).shadow_until
    assert scheduled(queue) == [(whole_second_after(until), (agent.pk, "shadow_expired"))]


def test_a_sooner_moment_schedules_a_sooner_pass_and_a_later_one_waits_its_turn(
        transactional_db, people, redis_client):
    """At most one timed pass waits per agent, the soonest; when it runs it asks for the
    next one."""
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"},
                           grants=[grant("crm", timezone.now() + timedelta(days=2))])
    queue = django_rq.get_queue("reconcile")
    assert queued_pass(queue, agent, "approved").perform() == "converged"
    (grant_end, _), = scheduled(queue)
    waiver = registry_actions.grant_waiver(
        agent.name, pointer="/tools/crm.search", reason="migration", ticket="CHG-1",
        duration="1h", actor=people.dana)
    assert queued_pass(queue, agent, "waiver_granted").perform() == "converged"
    assert sorted(scheduled(queue)) == [
        (whole_second_after(waiver.expires_at), (agent.pk, "waiver_lapsed")),
        (grant_end, (agent.pk, "grant_expired"))]
    enqueue_reconcile(agent.pk, "manual")  # a pass before both: nothing new waits
    assert queued_pass(queue, agent, "manual").perform() == "converged"
    assert len(scheduled(queue)) == 2


def test_a_window_that_held_a_correction_brings_one_pass_back_at_its_end(
        transactional_db, people, redis_client):
    """The pass that held the correction asks for the one at the window's end; the window's
    own end job records the end and asks for no second pass."""
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    queue = django_rq.get_queue("reconcile")
    assert queued_pass(queue, agent, "approved").perform() == "converged"
    window = window_for_an_hour(people)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes={"tools": CRM},
                                   reason="hotfix")
    waiting = [job for job in queue.get_jobs() if job.args[0] == agent.pk]
    assert [job.perform() for job in waiting][0] == "drifted"  # held, not corrected
    assert scheduled(queue) == [(whole_second_after(window.ends_at),
                                 (agent.pk, "window_ended"))]
    window.ends_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["ends_at"])
    assert compliance_actions.end_window(window.pk) is True
    assert [job.id for job in queue.get_jobs()] == [job.id for job in waiting]
