"""Bob's queue (/inbox/ and GET /api/v1/inbox): only what he may decide, most urgent first
(least time left to its deadline or SLA), the escalations one bad deployment made folded into
one incident decided once, and bulk assign and acknowledge, each audited."""

import re
from datetime import timedelta

import pytest
import yaml
from django.utils import timezone

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.models import Escalation, Finding
from registry import actions as registry_actions
from registry.choices import VersionSource
from registry.manifest import validate_manifest
from registry.models import DesiredStateVersion
from runtime import actions as runtime_actions
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, REFUND_AGENT_YAML, approved_agent, refund_manifest

pytestmark = pytest.mark.django_db


def bad_deployment(people, name: str = "payouts-agent", mode: str = "escalate"):
    """A real bad deployment on an agent whose every area escalates: three drifts, one pass."""
    agent = approved_agent(people, name, enforcement={"default": mode})
    actions.reconcile_agent(agent.pk, trigger="approved")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")
    return agent


def proposal_by_alice(agent, **spec) -> DesiredStateVersion:
    return registry_actions.propose(agent, refund_manifest(**spec).spec,
                                    agent.active_version.metadata, actor=agent.owner,
                                    source=VersionSource.API).version


def keys(body: str) -> list[str]:
    return re.findall(r'<tr id="item-([\w-]+)" class="inbox-item"', body)


def test_a_decision_that_auto_denies_in_4_minutes_comes_before_a_proposal_waiting_an_hour(
        people, client, api_as, settings):
    settings.DECISION_TIMEOUT_SECONDS = 240
    agent = approved_agent(people, "refund-agent")
    proposal = proposal_by_alice(agent, model="gpt-5")
    DesiredStateVersion.objects.filter(pk=proposal.pk).update(
        created_at=timezone.now() - timedelta(hours=1))
    decision = runtime_actions.request_decision(agent, {"action": "payments.refund", "amount": 800},
                                        actor=people.alice)
    asked = Escalation.objects.get(decision=decision)
    drifted = bad_deployment(people)
    incident = Escalation.objects.filter(agent=drifted).order_by("pk").first()

    client.force_login(people.bob)
    body = client.get("/inbox/").content.decode()
    # decision: 4 min left; incident: 4 h SLA; proposal: 2 days less the hour it waited
    assert keys(body) == [f"escalation-{asked.pk}", f"escalation-{incident.pk}",
                          f"proposal-{proposal.pk}"]
    assert "3 min left" in body or "4 min left" in body
    assert "1 d 22 h left" in body  # 48 h less the hour it waited (and a few seconds)
    listed = api_as(people.bob).get("/api/v1/inbox").json()
    assert [i["kind"] for i in listed["items"]] == ["decision", "incident", "proposal"]
    assert 200 < listed["items"][0]["seconds_left"] <= 240
    assert listed["total"] == 3 and listed["escalations"] == 1  # one incident, not three lines
    by_age = keys(client.get("/inbox/?sort=age").content.decode())
    assert by_age[0] == f"proposal-{proposal.pk}"
    only = api_as(people.bob).get("/api/v1/inbox?kind=proposal").json()["items"]
    assert [i["key"] for i in only] == [f"proposal-{proposal.pk}"]


def test_counts_leave_out_what_four_eyes_forbids_and_what_he_already_approved(
        people, client, api_as):
    registry_actions.create_guardrail(
        actor=people.dana, name="crm-write-two-approvers", effect="require_approvals",
        expression='!spec.data.exists(d, d.resource == "crm" && d.access == "write")',
        required_approvals=2, message="write on crm needs two approvers")
    agent = approved_agent(people, "refund-agent")
    version = proposal_by_alice(agent, data=[{"resource": "crm", "access": "write"}])
    registry_actions.approve_proposal(version.pk, actor=people.bob)
    assert DesiredStateVersion.objects.get(pk=version.pk).state == "pending"

    bob, carol = api_as(people.bob), api_as(people.carol)
    assert bob.get("/api/v1/inbox").json()["proposals"] == 0  # he approved this revision
    assert carol.get("/api/v1/inbox").json()["proposals"] == 1
    client.force_login(people.bob)
    detail = client.get(f"/proposals/{version.pk}/").content.decode()
    assert f'action="/proposals/{version.pk}/approve"' not in detail
    assert "You approved this revision" in detail
    nav = client.get("/agents/").content.decode()
    assert re.search(r'id="inbox-count" hidden>0<', nav)

    # an agent bob registers himself (he is an owner too) is his own proposal: carol's to decide
    registry_actions.grant_role(people.bob, "owner", actor="system:test")
    document = yaml.safe_load(REFUND_AGENT_YAML)
    document["metadata"].update(name="bobs-agent", owner="bob")
    bob_the_owner = type(people.bob).objects.get(pk=people.bob.pk)  # roles are cached
    (mine,) = registry_actions.apply_manifests([validate_manifest(document)], actor=bob_the_owner,
                                               source=VersionSource.YAML)
    assert f"proposal-{mine.version.pk}" not in [
        i["key"] for i in bob.get("/api/v1/inbox").json()["items"]]
    assert f"proposal-{mine.version.pk}" in [
        i["key"] for i in carol.get("/api/v1/inbox").json()["items"]]


def test_one_bad_deployment_is_one_incident_decided_once(people, client):
    agent = bad_deployment(people)
    escalations = list(Escalation.objects.filter(agent=agent).order_by("pk"))
    assert len(escalations) == 3
    client.force_login(people.bob)
    body = client.get("/inbox/").content.decode()
    assert keys(body) == [f"escalation-{escalations[0].pk}"]
    assert "3 drifts from one change" in body and "3 findings" in body
    audited = AuditEntry.objects.filter(action="escalation.resolved").count()
    response = client.post(f"/inbox/incidents/{escalations[0].pk}/resolve",
                           {"resolution": "revert", "comment": "bad deploy",
                            "next": "/inbox/"})
    assert response.status_code == 302 and response["Location"] == "/inbox/"
    assert set(Escalation.objects.filter(agent=agent).values_list("status", "resolution")) == {
        ("resolved", "revert")}
    assert AuditEntry.objects.filter(action="escalation.resolved").count() == audited + 3
    assert set(Finding.objects.filter(agent=agent).values_list("revert_ordered", flat=True)) == {
        True}
    assert keys(client.get("/inbox/").content.decode()) == []


def test_accepting_an_incident_makes_one_proposal_holding_all_its_findings(people, api_as):
    agent = bad_deployment(people)
    first = Escalation.objects.filter(agent=agent).order_by("pk").first()
    answer = api_as(people.bob).post(f"/api/v1/incidents/{first.pk}/resolve",
                                     {"resolution": "accept", "comment": "keep it"},
                                     format="json")
    assert answer.status_code == 200, answer.content
    assert [e["resolution"] for e in answer.json()["escalations"]] == ["accept"] * 3
    proposals = set(Finding.objects.filter(agent=agent).values_list("proposal", flat=True))
    assert len(proposals) == 1 and None not in proposals


def test_the_owner_cannot_decide_his_incident_and_a_refusal_changes_nothing(people, api_as):
    agent = bad_deployment(people)
    first = Escalation.objects.filter(agent=agent).order_by("pk").first()
    registry_actions.grant_role(people.alice, "approver", actor="system:test")
    refused = api_as(people.alice).post(f"/api/v1/incidents/{first.pk}/resolve",
                                        {"resolution": "revert", "comment": "mine"},
                                        format="json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "four_eyes"
    assert api_as(people.alice).get("/api/v1/inbox").json()["escalations"] == 0
    assert not Escalation.objects.filter(agent=agent, status="resolved").exists()
    bad = api_as(people.bob).post(f"/api/v1/incidents/{first.pk}/resolve",
                                  {"resolution": "sideways", "comment": "x"}, format="json")
    assert bad.status_code == 400 and "error" in bad.json()


def test_bulk_assign_and_acknowledge_from_the_page_and_the_api_all_or_none(
        people, client, api_as):
    first = bad_deployment(people, "payouts-agent")
    second = bad_deployment(people, "billing-agent")
    heads = [Escalation.objects.filter(agent=a).order_by("pk").first() for a in (first, second)]
    client.force_login(people.bob)
    response = client.post("/inbox/triage", {"escalation": [e.pk for e in heads],
                                             "bulk": "assign", "next": "/inbox/"})
    assert response.status_code == 302
    assert set(Escalation.objects.values_list("assignee__username", flat=True)) == {"bob"}
    assert AuditEntry.objects.filter(action="escalation.triaged").count() == 6
    body = client.get("/inbox/").content.decode()
    assert body.count('<td class="assignee">bob') == 2

    carol = api_as(people.carol)
    done = carol.post("/api/v1/inbox/triage", {"escalations": [heads[0].pk],
                                               "acknowledge": True}, format="json")
    assert done.status_code == 200 and len(done.json()["escalations"]) == 3
    assert Escalation.objects.filter(acknowledged_at__isnull=False).count() == 3

    # one id of an agent alice owns (she is an approver too): four eyes refuses them all
    registry_actions.grant_role(people.alice, "approver", actor="system:test")
    alice = api_as(people.alice)
    before = AuditEntry.objects.count()
    refused = alice.post("/api/v1/inbox/triage", {
        "escalations": [heads[1].pk], "assign": True}, format="json")
    assert refused.status_code == 403
    assert AuditEntry.objects.count() == before
    empty = carol.post("/api/v1/inbox/triage", {"escalations": [], "assign": True},
                       format="json")
    assert empty.status_code == 400 and "error" in empty.json()
    neither = carol.post("/api/v1/inbox/triage", {"escalations": [heads[0].pk]},
                         format="json")
    assert neither.status_code == 422


def test_the_queue_is_for_approvers_and_bad_filters_are_refused(people, client, api_as):
    client.force_login(people.dana)  # compliance: no inbox (an owner has one for reminders)
    assert client.get("/inbox/").status_code == 403
    assert api_as(people.dana).get("/api/v1/inbox").status_code == 403
    bad = api_as(people.bob).get("/api/v1/inbox?kind=everything")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["pointer"] == "/kind"
    client.force_login(people.bob)
    assert client.get("/inbox/?kind=everything&sort=sideways").status_code == 200


def test_a_corrected_finding_offers_no_acknowledge(people, client):
    agent = bad_deployment(people, mode="correct")
    actions.reconcile_agent(agent.pk, trigger="verify")
    corrected = Finding.objects.filter(agent=agent, status="corrected")
    assert corrected.exists()
    client.force_login(people.dana)
    page = client.get("/findings/").content.decode()
    assert "corrected: nothing to acknowledge" in page
    from config.errors import Conflict
    with pytest.raises(Conflict):
        actions.acknowledge_finding(corrected.first().pk, actor=people.dana, reason="seen")


def test_one_escalation_alert_per_incident_not_per_finding(people):
    from reconciliation.models import AlertEvent

    agent = bad_deployment(people)
    assert Escalation.objects.filter(agent=agent).count() == 3
    assert AlertEvent.objects.filter(event="escalation.opened",
                                     agent_name=agent.name).count() == 1


def test_the_drift_alerts_of_one_deployment_carry_one_incident(people):
    from reconciliation.models import AlertEvent

    agent = bad_deployment(people, mode="correct")
    other = bad_deployment(people, "billing-agent", mode="correct")
    tokens = {a.payload["incident"] for a in AlertEvent.objects.filter(
        event="drift.detected", agent_name=agent.name)}
    assert len(tokens) == 1
    assert tokens.isdisjoint(a.payload["incident"] for a in AlertEvent.objects.filter(
        event="drift.detected", agent_name=other.name))


def test_the_queue_costs_the_same_queries_whatever_its_length(people, client, api_as):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    bob = api_as(people.bob)
    client.force_login(people.bob)

    def cost() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as api:
            assert bob.get("/api/v1/inbox").status_code == 200
        with CaptureQueriesContext(connection) as page:
            assert client.get("/inbox/").status_code == 200
        return len(api), len(page)

    bad_deployment(people, "agent-a")
    proposal_by_alice(approved_agent(people, "agent-b"), model="gpt-5")
    cost()  # the first call also records the token's first use
    small = cost()
    for name in ("agent-c", "agent-d", "agent-e"):
        bad_deployment(people, name)
        proposal_by_alice(approved_agent(people, f"{name}-2"), model="gpt-5")
    assert len(bob.get("/api/v1/inbox").json()["items"]) == 8
    assert cost() == small


def test_the_badge_counts_each_incident_once_and_leaves_out_the_approvers_own_agents(
        people, client, api_as):
    from registry.models import Agent

    bad_deployment(people, "agent-a")  # three escalations, one incident
    bad_deployment(people, "agent-b")
    proposal_by_alice(approved_agent(people, "agent-c"), model="gpt-5")
    Agent.objects.filter(name="agent-b").update(owner=people.carol)  # four eyes: not hers
    assert Escalation.objects.filter(status="open").count() == 6

    def badge(person) -> str:
        client.force_login(person)
        return re.search(r'id="inbox-count"[^>]*>(\d+)<',
                         client.get("/agents/").content.decode()).group(1)

    assert sorted(i["kind"] for i in api_as(people.bob).get("/api/v1/inbox").json()[
        "items"]) == ["incident", "incident", "proposal"]
    assert badge(people.bob) == "3"
    assert sorted(i["kind"] for i in api_as(people.carol).get("/api/v1/inbox").json()[
        "items"]) == ["incident", "proposal"]
    assert badge(people.carol) == "2"
