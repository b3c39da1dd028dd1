"""The approvals inbox as bob uses it: proposals, escalations and pending decisions in one queue,
longest waiting first, each decided in place (assign, acknowledge, snooze until a chosen
time, resolve with a comment, allow or deny), always back to the inbox with a message."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.models import AlertEvent, Escalation
from registry import actions as registry_actions
from runtime import actions as runtime_actions
from runtime.models import Decision
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, approved_agent, eventually, refund_manifest

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return response.content.decode()


def escalated_drift(people, name: str = "payouts-agent") -> Escalation:
    """A real escalation: the $500 rule dropped on an agent whose actions area escalates."""
    agent = approved_agent(people, name, enforcement={"default": "correct",
                                                      "actions": "escalate"})
    actions.reconcile_agent(agent.pk, trigger="approved")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")
    return Escalation.objects.get(agent=agent, status="open")


def card(body: str, escalation: Escalation) -> str:
    """The escalation's card on a page."""
    match = re.search(rf'<article class="card escalation"[^>]*data-escalation="{escalation.pk}"'
                      r".*?</article>", body, re.S)
    assert match, f"no card for escalation {escalation.pk}"
    return match.group(0)


def in_queue(client, escalation: Escalation) -> bool:
    return f'data-escalation="{escalation.pk}"' in text(client.get("/approvals/"))


def test_one_queue_longest_waiting_first_with_forms_that_act_in_place(people, client):
    first = escalated_drift(people)
    agent = approved_agent(people, "refund-agent")
    proposal = registry_actions.propose(agent, refund_manifest(model="gpt-5").spec,
                                        agent.active_version.metadata, actor=people.alice,
                                        source="api").version
    decision = runtime_actions.request_decision(agent, {"action": "payments.refund", "amount": 800},
                                        actor=people.alice)
    pending = Escalation.objects.get(decision=decision)
    client.force_login(people.bob)
    body = text(client.get("/approvals/"))
    places = [body.index(anchor) for anchor in (
        f'id="esc-{first.pk}"', f'id="proposal-{proposal.pk}"', f'id="esc-{pending.pk}"')]
    assert places == sorted(places)  # the order they started waiting in
    assert "proposals <strong data-inbox-count=\"proposals\">1<" in body
    drift = card(body, first)
    assert f'action="/escalations/{first.pk}/resolve"' in drift
    assert f'action="/escalations/{first.pk}/triage"' in drift
    assert 'name="next" value="/approvals/"' in drift
    assert [v for v in re.findall(r'name="resolution" value="(\w+)"', drift)] == [
        "revert", "accept", "suspend"]
    assert 'type="datetime-local"' in drift and "Snooze until tomorrow 09:00 UTC" in drift
    asked = card(body, pending)
    assert re.findall(r'name="resolution" value="(\w+)"', asked) == ["allow", "deny"]
    assert "Approve #" in body and f'action="/proposals/{proposal.pk}/approve"' in body


def test_bob_resolves_an_escalation_from_the_inbox_and_comes_back_to_it(people, client):
    escalation = escalated_drift(people)
    client.force_login(people.bob)
    audited = AuditEntry.objects.count()
    refused = client.post(f"/escalations/{escalation.pk}/resolve",
                          {"resolution": "revert", "comment": " ", "next": "/approvals/"})
    assert refused.status_code == 302 and refused["Location"] == f"/approvals/#esc-{escalation.pk}"
    body = text(client.get("/approvals/"))
    assert "needs a comment" in card(body, escalation)  # shown at the card it is about
    assert Escalation.objects.get(pk=escalation.pk).status == "open"
    assert AuditEntry.objects.count() == audited
    response = client.post(f"/escalations/{escalation.pk}/resolve",
                           {"resolution": "revert", "comment": "the $500 rule is policy",
                            "next": "/approvals/"}, follow=True)
    assert response.redirect_chain[-1][0] == f"/approvals/#esc-{escalation.pk}"
    assert f"Escalation {escalation.pk} resolved: revert." in text(response)
    assert f'data-escalation="{escalation.pk}"' not in text(response)
    escalation.refresh_from_db()
    assert (escalation.status, escalation.resolution, escalation.resolved_by) == (
        "resolved", "revert", people.bob)
    assert escalation.finding.revert_ordered


def test_a_resolution_the_escalation_does_not_offer_is_refused(people, client):
    escalation = escalated_drift(people)
    client.force_login(people.bob)
    response = client.post(f"/escalations/{escalation.pk}/resolve",
                           {"resolution": "allow", "comment": "sure", "next": "/approvals/"},
                           follow=True)
    assert "Drift is resolved with revert, accept or suspend." in text(response)
    assert Escalation.objects.get(pk=escalation.pk).status == "open"


def test_pending_decisions_are_allowed_in_place(people, client):
    agent = approved_agent(people, "refund-agent")
    decision = runtime_actions.request_decision(agent, {"action": "payments.refund", "amount": 800},
                                        actor=people.alice)
    escalation = Escalation.objects.get(decision=decision)
    client.force_login(people.bob)
    response = client.post(f"/escalations/{escalation.pk}/resolve",
                           {"resolution": "allow", "comment": "customer confirmed",
                            "next": "/approvals/"}, follow=True)
    assert response.redirect_chain[-1][0].startswith("/approvals/")
    assert "resolved: allow" in text(response)
    assert Decision.objects.get(pk=decision.pk).status == "approved"


def test_assign_and_acknowledge_from_the_inbox(people, client):
    escalation = escalated_drift(people)
    client.force_login(people.bob)
    for choice, said in (("assign", "assigned to you"), ("acknowledge", "acknowledged")):
        response = client.post(f"/escalations/{escalation.pk}/triage",
                               {"triage": choice, "next": "/approvals/"}, follow=True)
        assert f"Escalation #{escalation.pk} {said}." in text(response)
    drift = card(text(client.get("/approvals/")), escalation)
    assert "Assigned to bob" in drift and "acknowledged" in drift


def test_snooze_until_hides_the_item_until_then_and_it_comes_back_by_itself(
        people, client, api_as):
    escalation = escalated_drift(people)
    client.force_login(people.bob)
    bob = api_as(people.bob)
    assert bob.get("/api/v1/inbox").json()["escalations"] == 1
    until = timezone.now().astimezone(UTC).replace(microsecond=0) + timedelta(seconds=3)
    response = client.post(f"/escalations/{escalation.pk}/triage", {
        "triage": "snooze_until", "until": until.strftime("%Y-%m-%dT%H:%M:%S"),
        "next": "/approvals/"}, follow=True)
    assert f"snoozed until {until:%Y-%m-%d %H:%M} UTC" in text(response)
    assert Escalation.objects.get(pk=escalation.pk).snoozed_until == until
    assert f'data-escalation="{escalation.pk}"' not in text(response)
    assert bob.get("/api/v1/inbox").json()["escalations"] == 0
    assert "snoozed until later 1" in text(response)
    # Nobody touches it: once its time has come it is back in the queue and the count.
    eventually(lambda: in_queue(client, escalation), timeout=15,
               message="the snoozed escalation never came back")
    assert bob.get("/api/v1/inbox").json()["escalations"] == 1


@pytest.mark.parametrize("until, problem", [
    (timedelta(minutes=-5), "Snooze until a time in the future."),
    (timedelta(days=8), "Snooze for at most 7 days."),
    (None, "Choose the date and time to snooze until."),
    ("tomorrow-ish", "Enter a valid date/time."),
])
def test_a_bad_snooze_time_is_a_form_error_and_changes_nothing(people, client, until,
                                                               problem):
    escalation = escalated_drift(people)
    client.force_login(people.bob)
    audited = AuditEntry.objects.count()
    value = "" if until is None else until if isinstance(until, str) else (
        timezone.now().astimezone(UTC) + until).strftime("%Y-%m-%dT%H:%M")
    response = client.post(f"/escalations/{escalation.pk}/triage",
                           {"triage": "snooze_until", "until": value, "next": "/approvals/"},
                           follow=True)
    drift = card(text(response), escalation)  # still in the queue
    assert problem in drift and 'aria-invalid="true"' in drift
    assert Escalation.objects.get(pk=escalation.pk).snoozed_until is None
    assert AuditEntry.objects.count() == audited


def test_the_api_snoozes_until_a_time_too(people, api_as):
    escalation = escalated_drift(people)
    bob = api_as(people.bob)
    until = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    answer = bob.post(f"/api/v1/escalations/{escalation.pk}/triage",
                      {"snooze_until": until.isoformat(), "assign": True}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["assignee"] == "bob"
    assert datetime.fromisoformat(answer.json()["snoozed_until"]) == until
    assert answer.json()["resolutions"] == ["revert", "accept", "suspend"]
    assert bob.get("/api/v1/inbox").json()["escalations"] == 0
    past = bob.post(f"/api/v1/escalations/{escalation.pk}/triage",
                    {"snooze_until": (timezone.now() - timedelta(hours=1)).isoformat()},
                    format="json")
    assert past.status_code == 422
    assert past.json()["error"]["details"] == [{"pointer": "/snooze_until",
                                                "message": "in the future"}]
    assert Escalation.objects.get(pk=escalation.pk).snoozed_until == until
    minutes = bob.post(f"/api/v1/escalations/{escalation.pk}/triage", {"snooze_minutes": 30},
                       format="json")
    assert minutes.status_code == 200
    assert api_as(people.dana).post(f"/api/v1/escalations/{escalation.pk}/triage",
                                    {"assign": True}, format="json").status_code == 403


def test_a_snooze_schedules_its_wake_up_which_tells_the_inboxes(people, redis_client,
                                                                django_capture_on_commit_callbacks):
    import django_rq
    from rq.registry import ScheduledJobRegistry

    from reconciliation.jobs import wake_escalation_job

    escalation = escalated_drift(people)
    until = timezone.now() + timedelta(hours=1)
    with django_capture_on_commit_callbacks(execute=True):
        actions.triage_escalation(escalation.pk, actor=people.bob, snooze_until=until)
    queue = django_rq.get_queue("default")
    (job_id,) = ScheduledJobRegistry(queue=queue).get_job_ids()
    job = queue.fetch_job(job_id)
    assert (job.func_name, job.args) == ("reconciliation.jobs.wake_escalation_job",
                                         (escalation.pk,))
    assert not wake_escalation_job(escalation.pk)  # ran early (a skewed clock): says nothing
    Escalation.objects.filter(pk=escalation.pk).update(  # its hour has passed
        snoozed_until=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert wake_escalation_job(escalation.pk)
    woke = AlertEvent.objects.get(event="escalation.woke")
    assert woke.payload["escalation"] == escalation.pk and woke.agent_name == "payouts-agent"
