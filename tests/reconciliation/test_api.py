"""The agent-facing and reviewer-facing reconciliation API."""

import pytest

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.controller.work_queue import QUEUED_KEY
from reconciliation.models import Escalation, Finding, ObservedState
from registry import actions as registry_actions
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import refund_manifest

pytestmark = pytest.mark.django_db



def report(**changes):
    spec = refund_manifest().spec
    state = {k: v for k, v in spec.items() if k != "enforcement"}
    return {**state, "running": True, **changes}


def test_an_agent_reports_its_state_and_identical_heartbeats_keep_one_history_row(
        agent_client, refund_agent, redis_client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        first = agent_client.put("/api/v1/agents/refund-agent/observed-state", report(),
                                 format="json")
    assert first.status_code == 202 and first.json()["changed"] is True
    queued = redis_client.get(QUEUED_KEY.format(agent_id=refund_agent.pk))
    assert queued.split()[0] == b"observation"
    again = agent_client.put("/api/v1/agents/refund-agent/observed-state", report(),
                             format="json")
    assert again.json()["changed"] is False
    changed = agent_client.put("/api/v1/agents/refund-agent/observed-state",
                               report(tools=["crm.search"]), format="json")
    assert changed.json()["changed"] is True
    assert ObservedState.objects.filter(agent=refund_agent).count() == 2
    assert AuditEntry.objects.filter(action="observation.recorded").first().actor == (
        "agent:refund-agent")


@pytest.mark.parametrize("body, pointer", [
    ({"tools": "crm"}, "/tools"),
    ({"colour": "red"}, "/colour"),
    ({"data": [{"resource": "crm"}]}, "/data/0/access"),
    ({"actions": {"payments.refund": {"approval_above": "lots"}}},
     "/actions/payments.refund/approval_above"),
    ({"running": "yes"}, "/running"),
    ([1, 2], ""),
])
def test_bad_observed_states_are_refused_with_pointers_and_store_nothing(
        agent_client, refund_agent, body, pointer):
    response = agent_client.put("/api/v1/agents/refund-agent/observed-state", body,
                                format="json")
    assert response.status_code == 422
    assert pointer in [d["pointer"] for d in response.json()["error"]["details"]]
    assert not ObservedState.objects.exists()


def test_malformed_json_is_a_400(agent_client):
    response = agent_client.generic("PUT", "/api/v1/agents/refund-agent/observed-state",
                                    '{"tools": [', content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "malformed"


def test_an_agent_token_cannot_touch_another_agent(agent_client, people):
    doc = refund_manifest()
    object.__setattr__(doc, "name", "other-agent")
    registry_actions.apply_manifests([doc], actor=people.alice, source="yaml")
    for method, path in (("put", "observed-state"), ("get", "desired-state")):
        response = getattr(agent_client, method)(f"/api/v1/agents/other-agent/{path}", {},
                                                 format="json")
        assert response.status_code == 403
    assert agent_client.get("/api/v1/agents/ghost/desired-state").status_code == 403


def test_desired_state_has_generation_and_an_etag_that_answers_304(agent_client):
    response = agent_client.get("/api/v1/agents/refund-agent/desired-state")
    assert response.status_code == 200
    body = response.json()
    assert body["generation"] == 1 and body["running"] is True
    assert body["spec"]["actions"]["payments.refund"] == {"approval_above": 500, "max": 5000}
    etag = response["ETag"]
    assert etag == f'"{body["sha256"]}"'
    cached = agent_client.get("/api/v1/agents/refund-agent/desired-state",
                              HTTP_IF_NONE_MATCH=etag)
    assert cached.status_code == 304 and cached.content == b""


def test_reconcile_now_is_for_the_owner_and_compliance(people, api_as, refund_agent,
                                                       redis_client):
    assert api_as(people.bob).post("/api/v1/agents/refund-agent/reconcile").status_code == 403
    for who in (people.alice, people.dana):
        assert api_as(who).post("/api/v1/agents/refund-agent/reconcile").status_code == 202


def test_reviewers_list_findings_and_resolve_escalations(people, api_as, refund_agent):
    sandbox_actions.sandbox_deploy(refund_agent, actor="system:test",
                           changes={"actions": {"payments.refund": {"max": 5000}}}, reason="x")
    actions.reconcile_agent(refund_agent.pk, trigger="manual")  # actions area: escalate
    bob = api_as(people.bob)
    findings = bob.get("/api/v1/findings?agent=refund-agent&status=escalated").json()["results"]
    assert [f["kind"] for f in findings] == ["action_limit_missing"]
    (escalation,) = bob.get("/api/v1/escalations?status=open").json()["results"]
    assert escalation["finding"]["pointer"] == "/actions/payments.refund/approval_above"
    assert api_as(people.alice).get("/api/v1/findings").status_code == 403
    missing_comment = bob.post(f"/api/v1/escalations/{escalation['id']}/resolve",
                               {"resolution": "revert"}, format="json")
    assert missing_comment.status_code == 422
    resolved = bob.post(f"/api/v1/escalations/{escalation['id']}/resolve",
                        {"resolution": "suspend", "comment": "stop it"}, format="json")
    assert resolved.status_code == 200 and resolved.json()["resolution"] == "suspend"
    refund_agent.refresh_from_db()
    assert refund_agent.lifecycle == "suspended"
    again = bob.post(f"/api/v1/escalations/{escalation['id']}/resolve",
                     {"resolution": "revert", "comment": "x"}, format="json")
    assert again.status_code == 409
    assert Escalation.objects.get().resolved_by == people.bob


def accept_the_drift(people, refund_agent):
    """A tighter refund threshold deployed, escalated, and accepted by carol."""
    sandbox_actions.sandbox_deploy(refund_agent, actor="system:test",
                           changes={"actions": {"payments.refund": {"approval_above": 400,
                                                                    "max": 5000}}},
                           reason="tighter")
    actions.reconcile_agent(refund_agent.pk, trigger="manual")
    escalation = Escalation.objects.get()
    actions.resolve_escalation(escalation.pk, actor=people.carol, resolution="accept",
                               comment="400 is fine")
    proposal = refund_agent.versions.filter(state="pending").get()
    assert proposal.spec["actions"]["payments.refund"]["approval_above"] == 400
    assert proposal.proposed_by == people.carol
    # While the proposal waits, the loop neither reverts the drift nor escalates it again.
    for _ in range(2):
        actions.reconcile_agent(refund_agent.pk, trigger="resync")
    assert SandboxAgent.objects.get(agent=refund_agent).state["actions"]["payments.refund"][
        "approval_above"] == 400
    assert Escalation.objects.count() == 1
    assert Finding.objects.get(pk=escalation.finding_id).status == "accepted"
    return proposal


def test_accepting_an_escalation_turns_the_observed_state_into_a_proposal(people, refund_agent):
    proposal = accept_the_drift(people, refund_agent)
    assert proposal.state == "pending" and proposal.guardrail_results == []


def test_an_accepted_drift_ends_with_its_proposal(people, refund_agent):
    from registry import actions as registry_actions

    proposal = accept_the_drift(people, refund_agent)
    registry_actions.approve_proposal(proposal.pk, actor=people.bob)
    run = actions.reconcile_agent(refund_agent.pk, trigger="approved")
    assert run.result == "converged" and run.changes == []
    finding = Finding.objects.get()
    assert finding.status == "resolved"
    # The trail says why: the approval, never "reopened" on the way.
    steps = list(AuditEntry.objects.filter(target=f"finding:{finding.pk}").order_by("seq")
                 .values_list("action", "reason"))
    assert steps[-1] == ("finding.resolved",
                         f"accepted into generation 2 on (proposal {proposal.pk} was approved)")
    assert "finding.reopened" not in [action for action, _ in steps]


@pytest.mark.parametrize("lands", ["before", "after"])
def test_an_approval_landing_as_a_pass_starts_resolves_the_accepted_drift_once(
        people, refund_agent, monkeypatch, lands):
    """The approval commits while a pass is starting: just before it releases held findings
    (the pass once judged the drift against the agent it had read before the approval, and
    escalated it again) or just after (the next pass resolves it)."""
    from reconciliation.reconciler import observe

    proposal = accept_the_drift(people, refund_agent)
    release = observe._release_accepted

    def approval_lands(ctx):
        held = release(ctx) if lands == "after" else None
        registry_actions.approve_proposal(proposal.pk, actor=people.bob)
        return release(ctx) if lands == "before" else held

    monkeypatch.setattr(observe, "_release_accepted", approval_lands)
    run = actions.reconcile_agent(refund_agent.pk, trigger="resync")
    monkeypatch.setattr(observe, "_release_accepted", release)
    assert run.generation == 2 and run.changes == []
    actions.reconcile_agent(refund_agent.pk, trigger="approved")
    finding = Finding.objects.get()
    assert finding.status == "resolved"
    assert Escalation.objects.count() == 1  # carol's, resolved by accepting: no second one
    assert SandboxAgent.objects.get(agent=refund_agent).state["actions"]["payments.refund"][
        "approval_above"] == 400  # never reverted
    assert not AuditEntry.objects.filter(action="finding.reopened").exists()


def agent_reads(refund_agent) -> int:
    """How many times one pass reads the agent's whole row (other reads take a column or two)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from registry.models import Agent

    table = Agent._meta.db_table
    with CaptureQueriesContext(connection) as queries:
        actions.reconcile_agent(refund_agent.pk, trigger="resync")
    return sum(1 for q in queries.captured_queries
               if q["sql"].startswith(f'SELECT "{table}"."id", "{table}"."name", '))


def test_a_pass_reads_its_agent_again_only_while_drift_is_held(people, refund_agent):
    """The second read is for an approval landing as the pass starts; a pass over an agent
    with no accepted drift (every pass of a converged fleet) does not pay for it."""
    actions.reconcile_agent(refund_agent.pk, trigger="manual")
    assert agent_reads(refund_agent) == 1
    accept_the_drift(people, refund_agent)
    assert agent_reads(refund_agent) == 2


def test_an_accepted_drift_whose_proposal_is_refused_is_back_in_the_loop(people, refund_agent):
    from audit.models import AuditEntry
    from registry import actions as registry_actions

    proposal = accept_the_drift(people, refund_agent)
    registry_actions.reject_proposal(proposal.pk, actor=people.bob, comment="keep 500")
    actions.reconcile_agent(refund_agent.pk, trigger="resync")
    finding = Finding.objects.get()
    assert finding.status == "escalated"  # the agent's mode for actions, as before
    assert Escalation.objects.filter(status="open", finding=finding).count() == 1
    assert list(AuditEntry.objects.filter(action="finding.reopened",
                                          target=f"finding:{finding.pk}")
                .values_list("reason", flat=True)) == [
        f"proposal {proposal.pk} that accepted it was rejected"]


def test_shadow_and_breaker_switches(people, api_as, refund_agent):
    dana, alice = api_as(people.dana), api_as(people.alice)
    assert alice.post("/api/v1/control/shadow", {"enabled": True},
                      format="json").status_code == 403
    assert dana.post("/api/v1/control/shadow", {"enabled": True},
                     format="json").json()["shadow"] is True
    asked = alice.post("/api/v1/agents/refund-agent/shadow",
                       {"enabled": True, "duration": "1h", "reason": "migration"}, format="json")
    assert asked.status_code == 202 and asked.json()["pending"] is True
    assert alice.get("/api/v1/agents/refund-agent").json()["shadow"] is False
    assert api_as(people.bob).post("/api/v1/agents/refund-agent/shadow/approve",
                                   format="json").status_code == 200
    assert alice.get("/api/v1/agents/refund-agent").json()["shadow"] is True
    assert dana.post("/api/v1/control/breaker/reset", {"reason": "x"},
                     format="json").status_code == 409
