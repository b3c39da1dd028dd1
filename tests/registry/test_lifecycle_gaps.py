"""The lifecycle's later steps: a waiver withdrawn before its end (by the owner or compliance,
audited, enforced again at once), a retirement rejected like any proposal, and a retired
agent's platform stop retried with backoff while the platform is down, then escalated."""

import pytest

from audit.models import AuditEntry
from reconciliation.models import Escalation
from registry import actions
from registry.models import Agent, Retirement, Waiver
from tests.conftest import approved_agent, eventually, make_person, token_client
from tests.reconciliation.platform_server import Platform
from tests.reconciliation.test_http_connector import SECRET, allow_platform, http_agent

WAIVER = {"pointer": "/tools/crm.search", "reason": "CRM lookups during the migration",
          "ticket": "CHG-1234", "duration": "1h"}


def waived(people) -> Waiver:
    approved_agent(people, "refund-agent")
    return actions.grant_waiver("refund-agent", actor=people.bob, **WAIVER)


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["alice", "dana"])
def test_the_owner_or_compliance_withdraws_a_waiver_and_it_ends_at_once(people, api_as, who):
    waiver = waived(people)
    answer = api_as(getattr(people, who)).post(f"/api/v1/waivers/{waiver.pk}/withdraw",
                                               {"reason": "migration finished early"},
                                               format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["withdrawn_by"] == who
    from django.utils import timezone

    from registry.actions.waivers import active_waivers

    assert active_waivers(Agent.objects.get(name="refund-agent"), timezone.now()) == []
    entry = AuditEntry.objects.get(action="waiver.withdrawn")
    assert (entry.actor, entry.reason) == (who, "migration finished early")
    assert entry.before["withdrawn_at"] is None and entry.after["withdrawn_by"] == who
    again = api_as(getattr(people, who)).post(f"/api/v1/waivers/{waiver.pk}/withdraw",
                                              {"reason": "twice"}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "ended"
    assert not AuditEntry.objects.filter(action="waiver.lapsed").exists()  # withdrawn, not lapsed


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["bob", "carol", "stranger", "agent"])
def test_approvers_other_owners_and_the_agent_cannot_withdraw_a_waiver(people, api_as, who):
    waiver = waived(people)
    client = (token_client(people, waiver.agent) if who == "agent" else
              api_as(make_person("stranger", "owner")) if who == "stranger" else
              api_as(getattr(people, who)))
    answer = client.post(f"/api/v1/waivers/{waiver.pk}/withdraw", {"reason": "mine now"},
                         format="json")
    assert answer.status_code == 403
    waiver.refresh_from_db()
    assert waiver.withdrawn_at is None


@pytest.mark.django_db
def test_a_withdrawal_needs_a_reason_and_an_existing_waiver(people, api_as):
    waiver = waived(people)
    alice = api_as(people.alice)
    answer = alice.post(f"/api/v1/waivers/{waiver.pk}/withdraw", {"reason": ""}, format="json")
    assert answer.status_code == 400
    assert answer.json()["error"]["details"][0]["pointer"] == "/reason"
    assert alice.post("/api/v1/waivers/999999/withdraw", {"reason": "x"},
                      format="json").status_code == 404
    waiver.refresh_from_db()
    assert waiver.withdrawn_at is None


@pytest.mark.django_db
def test_an_approver_rejects_a_retirement_and_the_agent_stays(people, api_as):
    approved_agent(people, "refund-agent")
    alice, bob = api_as(people.alice), api_as(people.bob)
    proposed = alice.post("/api/v1/agents/refund-agent/retirement",
                          {"reason": "replaced by refunds-v2"}, format="json").json()
    no_reason = bob.post(f"/api/v1/retirements/{proposed['id']}/reject", {"comment": ""},
                         format="json")
    assert no_reason.status_code == 400
    assert alice.post(f"/api/v1/retirements/{proposed['id']}/reject", {"comment": "no"},
                      format="json").status_code == 403  # the owner decides nothing
    assert api_as(people.dana).post(f"/api/v1/retirements/{proposed['id']}/reject",
                                    {"comment": "no"}, format="json").status_code == 403
    rejected = bob.post(f"/api/v1/retirements/{proposed['id']}/reject",
                        {"comment": "v2 is not live yet"}, format="json")
    assert rejected.status_code == 200, rejected.json()
    assert (rejected.json()["state"], rejected.json()["decision_comment"]) == (
        "rejected", "v2 is not live yet")
    assert Agent.objects.get(name="refund-agent").lifecycle == "active"
    entry = AuditEntry.objects.get(action="retirement.rejected")
    assert (entry.actor, entry.reason) == ("bob", "v2 is not live yet")
    late = bob.post(f"/api/v1/retirements/{proposed['id']}/approve", {}, format="json")
    assert late.status_code == 409
    # It may be proposed again later.
    assert alice.post("/api/v1/agents/refund-agent/retirement", {"reason": "now v2 is live"},
                      format="json").status_code == 201
    assert Retirement.objects.filter(state="pending").count() == 1


def test_the_platform_stop_is_retried_while_the_platform_is_down(
        people, start_worker, monkeypatch, settings, api_as):
    monkeypatch.setenv("PLATFORM_SECRET", SECRET)
    with Platform(SECRET) as platform:
        env = allow_platform(settings, platform)
        agent = http_agent(people, platform)
        platform.fail_next = 10**6  # down: every request answers 503
        worker = start_worker("reconcile", "default", PLATFORM_SECRET=SECRET, **env)
        retirement = actions.propose_retirement("refund-agent", actor=people.alice,
                                                reason="replaced")
        actions.approve_retirement(retirement.pk, actor=people.bob)
        eventually(lambda: any(b"suspend" in r["body"] for r in platform.received),
                   timeout=90, message=worker.output())
        platform.fail_next = 0  # back up: the next attempt, with the same key, stops it
        eventually(lambda: AuditEntry.objects.filter(action="agent.stopped").exists(),
                   timeout=90, message=worker.output())
        assert platform.states["refund-agent"]["running"] is False
    assert not AuditEntry.objects.filter(action="agent.stop_failed").exists()
    assert Agent.objects.get(pk=agent.pk).lifecycle == "retired"


def test_a_platform_that_stays_down_is_escalated_to_the_approvers(
        people, start_worker, monkeypatch, settings):
    monkeypatch.setenv("PLATFORM_SECRET", SECRET)
    with Platform(SECRET) as platform:
        env = allow_platform(settings, platform)
        agent = http_agent(people, platform)
        platform.fail_next = 10**6
        worker = start_worker("reconcile", "default", PLATFORM_SECRET=SECRET,
                              RETIRE_STOP_MAX_RETRIES="2", **env)
        retirement = actions.propose_retirement("refund-agent", actor=people.alice,
                                                reason="replaced")
        actions.approve_retirement(retirement.pk, actor=people.bob)
        failed = eventually(lambda: AuditEntry.objects.filter(
            action="agent.stop_failed").first(), timeout=120, message=worker.output())
    assert failed.after["attempts"] == 3 and "stop it by hand" in failed.reason
    escalation = Escalation.objects.get(agent=agent)
    assert escalation.status == "open" and "could not be asked to stop" in escalation.reason
