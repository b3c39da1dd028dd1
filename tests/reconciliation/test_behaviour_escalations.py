"""Behaviour escalations get behaviour resolutions: acknowledge (a one-off), suspend (through
the connector, held in shadow mode), or raise the limit (a proposal under four-eyes); the
configuration-drift ones (revert, accept) are refused for them, and theirs for drift."""

import uuid
from datetime import UTC, datetime, timedelta

import django_rq
import pytest
from rest_framework.test import APIClient
from rq import SimpleWorker

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.models import AgentStatus, Escalation, Finding
from registry import actions as registry_actions
from registry.models import Agent, DesiredStateVersion
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import approved_with_client, shadow_on
from tests.reconciliation.test_behaviour_rules import SUPPORT as BEHAVIOUR_SPEC

# The customer-database agent of the behaviour rules' tests, under behaviour: escalate.
SUPPORT = {**BEHAVIOUR_SPEC,
           "enforcement": {"default": "correct", "behaviour": "escalate", "actions": "escalate"}}


@pytest.fixture
def agent_and_client(people, redis_client) -> tuple[Agent, APIClient]:
    """The refund agent under behaviour: escalate, and a client holding its token."""
    return approved_with_client(people, **SUPPORT)


def read(record: str, minutes_ago: int) -> dict:
    ts = (datetime.now(UTC) - timedelta(minutes=minutes_ago)).isoformat()
    return {"id": uuid.uuid4().hex, "agent": "refund-agent", "ts": ts, "kind": "data_access",
            "resource": "customers_db", "record": record}


def refund(amount: float) -> dict:
    return {"id": uuid.uuid4().hex, "agent": "refund-agent", "ts": datetime.now(UTC).isoformat(),
            "kind": "action", "action": "payments.refund", "amount": amount}


def send(client: APIClient, events: list[dict], capture) -> None:
    """POST the events as the agent does, then let the ingest worker record what they broke."""
    with capture(execute=True):
        assert client.post("/api/v1/events", events, format="json").json()["accepted"] == len(
            events)
    queue = django_rq.get_queue("ingest")
    SimpleWorker([queue], connection=queue.connection).work(burst=True)


def five_reads_of_one_record(client, capture) -> Escalation:
    send(client, [read("customer-42", minutes_ago=50 - i) for i in range(5)], capture)
    return Escalation.objects.get(finding__kind="same_record_exceeded", status="open")


def conditions(api, name="refund-agent") -> dict[str, str]:
    body = api.get(f"/api/v1/agents/{name}").json()
    return {c["type"]: c["status"] for c in body["conditions"]}


def resolve(api, escalation: Escalation, resolution: str, comment: str = "reviewed"):
    return api.post(f"/api/v1/escalations/{escalation.pk}/resolve",
                    {"resolution": resolution, "comment": comment}, format="json")


def test_a_behaviour_escalation_offers_behaviour_resolutions(
        people, api_as, agent_and_client, django_capture_on_commit_callbacks):
    agent, client = agent_and_client
    escalation = five_reads_of_one_record(client, django_capture_on_commit_callbacks)
    (listed,) = api_as(people.bob).get("/api/v1/escalations?status=open").json()["results"]
    assert listed["id"] == escalation.pk
    assert (listed["kind"], listed["resolutions"]) == (
        "behaviour", ["acknowledge", "suspend", "raise_limit"])
    assert (listed["finding"]["pointer"], listed["finding"]["expected"],
            listed["finding"]["actual"]) == ("/limits/customers_db/max_same_record", 3, 5)


def test_acknowledging_closes_the_finding_and_the_agent_is_in_policy_again(
        people, api_as, agent_and_client, django_capture_on_commit_callbacks):
    agent, client = agent_and_client
    escalation = five_reads_of_one_record(client, django_capture_on_commit_callbacks)
    bob = api_as(people.bob)
    assert conditions(bob) == {"Ready": "False", "Drifted": "True", "Reconciling": "False",
                               "Escalated": "True", "Suspended": "False",
                               "Recertified": "True"}

    resolved = resolve(bob, escalation, "acknowledge", "support re-read one customer's file")
    assert resolved.status_code == 200, resolved.content
    assert (resolved.json()["status"], resolved.json()["resolution"]) == (
        "resolved", "acknowledge")
    finding = Finding.objects.get(pk=escalation.finding_id)
    assert (finding.status, finding.acknowledged_by) == ("acknowledged", people.bob)
    assert "support re-read one customer's file" in finding.reason
    assert conditions(bob) == {"Ready": "True", "Drifted": "False", "Reconciling": "False",
                               "Escalated": "False", "Suspended": "False",
                               "Recertified": "True"}
    assert AgentStatus.objects.get(agent=agent).health == "in_policy"
    # The next pass agrees: nothing reopens it.
    run = actions.reconcile_agent(agent.pk, trigger="resync")
    assert run.result == "converged"
    assert Finding.objects.get(pk=finding.pk).status == "acknowledged"
    assert AgentStatus.objects.get(agent=agent).health == "in_policy"
    trail = AuditEntry.objects.filter(agent="refund-agent", actor="bob").exclude(
        action__in=["proposal.approved", "version.activated", "agent.review_date_set"])
    assert list(trail.values_list("action", "target")) == [
        ("finding.acknowledged", f"finding:{finding.pk}"),
        ("escalation.resolved", f"escalation:{escalation.pk}")]
    assert trail.get(action="escalation.resolved").after == {
        "resolution": "acknowledge", "finding": {"status": "acknowledged"}}


def test_suspending_for_behaviour_stops_the_agent_through_its_connector(
        people, api_as, agent_and_client, django_capture_on_commit_callbacks):
    agent, client = agent_and_client
    escalation = five_reads_of_one_record(client, django_capture_on_commit_callbacks)
    bob = api_as(people.bob)
    with django_capture_on_commit_callbacks(execute=True):
        assert resolve(bob, escalation, "suspend", "stop the scraping").status_code == 200
    agent.refresh_from_db()
    assert agent.lifecycle == "suspended"
    assert SandboxAgent.objects.get(agent=agent).state["running"] is False  # the platform
    assert Finding.objects.get(pk=escalation.finding_id).status == "blocked"
    assert conditions(bob)["Suspended"] == "True"
    assert AgentStatus.objects.get(agent=agent).health == "suspended"
    assert AuditEntry.objects.filter(action="agent.suspended", agent="refund-agent",
                                     actor="bob").count() == 1
    run = actions.reconcile_agent(agent.pk, trigger="escalation")
    assert run.result == "converged" and run.changes == []  # already suspended on the platform


def test_a_suspension_in_shadow_mode_is_recorded_not_applied(
        people, api_as, agent_and_client, django_capture_on_commit_callbacks):
    agent, client = agent_and_client
    actions.reconcile_agent(agent.pk, trigger="manual")  # the platform runs it as approved
    escalation = five_reads_of_one_record(client, django_capture_on_commit_callbacks)
    shadow_on(people, agent)
    with django_capture_on_commit_callbacks(execute=True):
        assert resolve(api_as(people.bob), escalation, "suspend").status_code == 200
    agent.refresh_from_db()
    assert agent.lifecycle == "active"
    assert SandboxAgent.objects.get(agent=agent).state["running"] is True
    finding = Finding.objects.get(pk=escalation.finding_id)
    assert finding.status == "logged" and "not applied: shadow mode" in finding.reason
    shadowed = AuditEntry.objects.get(action="correction.shadowed", agent="refund-agent")
    assert (shadowed.actor, shadowed.after["op"]) == ("bob", "suspend")


def test_raising_the_limit_proposes_it_and_the_finding_ends_with_the_approval(
        people, api_as, agent_and_client, django_capture_on_commit_callbacks):
    agent, client = agent_and_client
    escalation = five_reads_of_one_record(client, django_capture_on_commit_callbacks)
    bob = api_as(people.bob)
    resolved = resolve(bob, escalation, "raise_limit", "the nightly export reads each file 5x")
    assert resolved.status_code == 200, resolved.content
    proposal = DesiredStateVersion.objects.get(agent=agent, state="pending")
    assert proposal.spec["limits"] == [
        {"resource": "customers_db", "max_calls": 40, "per": "1h"},
        {"resource": "customers_db", "max_same_record": 5, "per": "1h"}]
    assert proposal.spec["actions"] == agent.active_version.spec["actions"]  # nothing else
    assert proposal.proposed_by == people.bob
    change = "raise max_same_record for customers_db from 3 to 5 per 1h"
    assert change in proposal.comment
    finding = Finding.objects.get(pk=escalation.finding_id)
    assert (finding.status, finding.proposal_id) == ("accepted", proposal.pk)
    assert AuditEntry.objects.get(action="escalation.resolved").after == {
        "resolution": "raise_limit", "finding": {"status": "accepted"},
        "proposal": proposal.pk, "change": change}
    # Held while the proposal waits: passes neither reopen nor escalate it again.
    actions.reconcile_agent(agent.pk, trigger="resync")
    assert Finding.objects.get(pk=finding.pk).status == "accepted"
    assert Escalation.objects.filter(status="open").count() == 0
    # Four eyes: bob proposed it, so bob cannot approve it; carol can.
    assert bob.post(f"/api/v1/proposals/{proposal.pk}/approve", {},
                    format="json").status_code == 403
    assert api_as(people.carol).post(f"/api/v1/proposals/{proposal.pk}/approve", {},
                                     format="json").status_code == 200
    actions.reconcile_agent(agent.pk, trigger="approved")
    finding.refresh_from_db()
    assert finding.status == "resolved" and "generation 2" in finding.reason
    assert conditions(bob) == {"Ready": "True", "Drifted": "False", "Reconciling": "False",
                               "Escalated": "False", "Suspended": "False",
                               "Recertified": "True"}


def test_a_refused_raise_hands_the_behaviour_back_to_a_human(
        people, api_as, agent_and_client, django_capture_on_commit_callbacks):
    agent, client = agent_and_client
    send(client, [refund(700)], django_capture_on_commit_callbacks)
    escalation = Escalation.objects.get(finding__kind="action_without_signoff")
    bob = api_as(people.bob)
    assert resolve(bob, escalation, "raise_limit", "700 is routine").status_code == 200
    proposal = DesiredStateVersion.objects.get(agent=agent, state="pending")
    assert proposal.spec["actions"]["payments.refund"] == {"approval_above": 700, "max": 5000}
    assert "raise approval_above for payments.refund from $500 to $700" in proposal.comment
    registry_actions.reject_proposal(proposal.pk, actor=people.carol, comment="500 is the rule")
    actions.reconcile_agent(agent.pk, trigger="resync")
    finding = Finding.objects.get(pk=escalation.finding_id)
    assert finding.status == "escalated"
    again = Escalation.objects.get(finding=finding, status="open")
    assert again.pk != escalation.pk and "was rejected" in again.reason
    assert AuditEntry.objects.filter(action="finding.reopened",
                                     target=f"finding:{finding.pk}").count() == 1
    assert conditions(bob)["Escalated"] == "True"


@pytest.mark.parametrize("resolution", ["revert", "accept", "allow"])
def test_drift_and_decision_resolutions_are_refused_for_behaviour(
        people, api_as, agent_and_client, django_capture_on_commit_callbacks, resolution):
    agent, client = agent_and_client
    escalation = five_reads_of_one_record(client, django_capture_on_commit_callbacks)
    bob = api_as(people.bob)
    audit_rows = AuditEntry.objects.count()
    refused = resolve(bob, escalation, resolution)
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "wrong_resolution"
    assert "behaviour is resolved with acknowledge" in error["message"]
    assert error["details"] == [{"pointer": "/resolution", "message":
                                 "a behaviour escalation takes acknowledge, suspend, "
                                 "raise_limit"}]
    escalation.refresh_from_db()
    assert escalation.status == "open"
    assert Finding.objects.get(pk=escalation.finding_id).status == "escalated"
    assert not DesiredStateVersion.objects.filter(state="pending").exists()
    assert AuditEntry.objects.count() == audit_rows


@pytest.mark.parametrize("resolution", ["acknowledge", "raise_limit"])
def test_behaviour_resolutions_are_refused_for_configuration_drift(people, api_as,
                                                                   agent_and_client,
                                                                   resolution):
    agent, _ = agent_and_client
    sandbox_actions.sandbox_deploy(agent, actor="system:test", reason="a bad deploy",
                           changes={"actions": {"payments.refund": {"max": 5000}}})
    actions.reconcile_agent(agent.pk, trigger="manual")  # actions area: escalate
    escalation = Escalation.objects.get(status="open")
    assert escalation.kind == "drift"
    refused = resolve(api_as(people.bob), escalation, resolution)
    assert refused.status_code == 422
    assert refused.json()["error"]["message"] == (
        "Drift is resolved with revert, accept or suspend.")
    assert Escalation.objects.get(pk=escalation.pk).status == "open"


def test_a_reused_sign_off_has_no_limit_to_raise(people, api_as, agent_and_client):
    from runtime.actions.behaviour import record_violations
    from runtime.behaviour import Violation

    agent, _ = agent_and_client
    violation = Violation("decision_reused", "/actions/payments.refund/approval_above", 500,
                          600, "actions", uuid.uuid4().hex, "reused an already used sign-off")
    record_violations(agent.pk, [{**violation.to_dict(), "window": "w1"}])
    escalation = Escalation.objects.get(status="open")
    refused = resolve(api_as(people.bob), escalation, "raise_limit")
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "nothing_to_raise"
    assert not DesiredStateVersion.objects.filter(state="pending").exists()


def test_the_escalations_page_offers_the_behaviour_choices(
        people, client, agent_and_client, django_capture_on_commit_callbacks):
    agent, agent_client = agent_and_client
    escalation = five_reads_of_one_record(agent_client, django_capture_on_commit_callbacks)
    client.force_login(people.bob)
    page = client.get("/escalations/").content.decode()
    assert "Acknowledge as a one-off" in page
    assert "Propose: raise max_same_record for customers_db from 3 to 5 per 1h" in page
    assert 'value="revert"' not in page and 'value="accept"' not in page
    inbox = client.get("/approvals/").content.decode()
    assert '<span class="tag">behaviour</span>' in inbox  # the inbox resolves it in place
    assert "Acknowledge as a one-off" in inbox and 'value="revert"' not in inbox
    client.post("/escalations/", {"escalation": escalation.pk, "resolution": "acknowledge",
                                  "comment": "known batch job"})
    assert Finding.objects.get(pk=escalation.finding_id).status == "acknowledged"
    refused = client.post("/escalations/", {"escalation": escalation.pk,
                                            "resolution": "revert", "comment": "x"},
                          follow=True).content.decode()
    assert "already resolved" in refused
