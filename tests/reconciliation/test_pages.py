"""The reconciliation pages: findings for compliance, the drift lab, escalations, the overview
and its dashboard API, each refusing the wrong people and using a fixed number of queries."""

import re
from datetime import timedelta

import pytest

from reconciliation import actions
from reconciliation.models import Finding
from registry import actions as registry_actions
from registry.models import Agent
from runtime import actions as runtime_actions
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import BAD_DEPLOYMENT, approved_agent, refund_manifest, shadow_on

pytestmark = pytest.mark.django_db


def sandbox_agents(people, count: int, start: int = 0) -> list[Agent]:
    made = [approved_agent(people, f"agent-{index:02d}", enforcement={"default": "correct"})
            for index in range(start, start + count)]
    for agent in made:
        actions.reconcile_agent(agent.pk, trigger="approved")
    return made


def drift_and_correct(agent: Agent) -> None:
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")


def test_findings_filter_and_acknowledge_with_a_reason(people, client):
    (agent,) = sandbox_agents(people, 1)
    drift_and_correct(agent)
    client.force_login(people.dana)
    page = client.get("/findings/?severity=high&source=config").content.decode()
    assert "data_added" in page and "action_limit_missing" in page
    assert "tool_added" not in page  # a new tool is medium: it is not write access
    assert "tool_added" in client.get("/findings/?severity=medium").content.decode()
    assert "tool_added" not in client.get("/findings/?kind=data_added").content.decode()
    finding = Finding.objects.get(kind="tool_added")
    assert finding.status == "corrected"  # the sandbox applied and verified the correction
    assert f'name="finding" value="{finding.pk}"' not in page  # nothing left to acknowledge
    client.post("/findings/", {"finding": finding.pk, "reason": "deployment rolled back"})
    finding.refresh_from_db()
    assert finding.acknowledged_by is None
    escalated = approved_agent(people, "payouts-agent",
                               enforcement={"default": "correct", "actions": "escalate"})
    actions.reconcile_agent(escalated.pk, trigger="approved")
    drift_and_correct(escalated)
    open_one = Finding.objects.get(agent=escalated, kind="action_limit_missing")
    client.post("/findings/", {"finding": open_one.pk, "reason": "deployment rolled back"})
    open_one.refresh_from_db()
    assert open_one.acknowledged_by == people.dana
    client.force_login(people.alice)  # the owner reads her agents' findings, acknowledges none
    owners = client.get("/findings/")
    assert owners.status_code == 200 and "payouts-agent" in owners.content.decode()
    assert "Acknowledge</button>" not in owners.content.decode()


def test_the_lab_injects_a_bad_deployment_for_compliance_only(people, client):
    (agent,) = sandbox_agents(people, 1)
    client.force_login(people.alice)
    assert client.get("/lab/").status_code == 403
    client.force_login(people.dana)
    assert "agent-00" in client.get("/lab/").content.decode()
    response = client.post("/lab/", {"agent": "agent-00", "what": "drift"}, follow=True)
    assert "bad deployment" in response.content.decode()
    assert "crm.search" in SandboxAgent.objects.get(agent=agent).state["tools"]


def test_overview_and_dashboard_api_count_agents_by_health(people, client, api_as):
    agents = sandbox_agents(people, 3)
    sandbox_actions.sandbox_deploy(agents[0], actor="system:test", changes=BAD_DEPLOYMENT,
                           reason="bad")
    shadow_on(people, agents[0])
    actions.reconcile_agent(agents[0].pk, trigger="observation")
    summary = api_as(people.bob).get("/api/v1/dashboard").json()
    assert summary["health"]["in_policy"] == 2 and summary["health"]["drifted"] == 1
    assert summary["post_convergence_drift"] == 1
    assert summary["charts"]["drift"]["data"][0]["name"] == "found: high"
    client.force_login(people.bob)
    page = client.get("/").content.decode()
    assert 'data-health="drifted">1<' in page and "/vendor/plotly-basic-4.1.1.min.js" in page
    js = client.get("/vendor/plotly-basic-4.1.1.min.js")
    assert js.status_code == 200 and b"plotly" in js.content[:2000].lower()


@pytest.mark.parametrize("path", ["/", "/findings/", "/escalations/"])
def test_pages_use_a_fixed_number_of_queries_whatever_the_cluster_size(
        people, client, path, django_assert_max_num_queries):
    client.force_login(people.dana)
    agents = sandbox_agents(people, 2)
    drift_and_correct(agents[0])
    with django_assert_max_num_queries(40) as few:
        assert client.get(path).status_code == 200
    for agent in sandbox_agents(people, 4, start=2):
        drift_and_correct(agent)
    with django_assert_max_num_queries(40) as many:
        assert client.get(path).status_code == 200
    assert len(many.captured_queries) == len(few.captured_queries)


def test_the_agent_page_marks_where_desired_and_actual_differ_and_draws_its_timeline(
        people, client):
    (agent,) = sandbox_agents(people, 1)
    shadow_on(people, agent)  # keep the drift
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")
    client.force_login(people.bob)
    page = client.get(f"/agents/{agent.name}/").content.decode()
    assert "Desired versus actual" in page
    assert '<tr class="only_actual">' in page and "crm.search" in page
    assert "✔ in policy from" in page and "✖ out of policy (drifted) from" in page


def test_side_by_side_rows_are_aligned():
    from reconciliation.compare import side_by_side

    rows = side_by_side({"a": 1, "b": [1, 2]}, {"a": 2, "b": [1, 2], "c": 3})
    assert [(r.tag, r.left, r.right) for r in rows] == [
        ("changed", "a: 1", "a: 2"), ("equal", "b:", "b:"), ("equal", "- 1", "- 1"),
        ("equal", "- 2", "- 2"), ("only_actual", "", "c: 3")]


def test_approvers_assign_acknowledge_and_snooze_escalations(people, client):
    from reconciliation.models import Escalation

    agents = sandbox_agents(people, 1)
    from reconciliation.actions import open_escalation

    escalation = open_escalation(agents[0], None, reason="look at this")
    client.force_login(people.bob)
    client.post("/escalations/", {"escalation": escalation.pk, "triage": "assign"})
    client.post("/escalations/", {"escalation": escalation.pk, "triage": "acknowledge"})
    escalation.refresh_from_db()
    assert escalation.assignee == people.bob and escalation.acknowledged_at is not None
    assert "Assigned to bob" in client.get("/escalations/").content.decode()
    client.post("/escalations/", {"escalation": escalation.pk, "triage": "snooze_1h"})
    page = client.get("/escalations/").content.decode()
    assert "look at this" not in page and "1 snoozed" in page
    assert "look at this" in client.get("/escalations/?snoozed=1").content.decode()
    assert Escalation.objects.get(pk=escalation.pk).snoozed_until is not None


@pytest.mark.parametrize("raw", ["\u00b2", "99999999999999999999", "-1", ""])
def test_an_escalation_id_that_is_not_a_number_is_refused_without_a_crash(people, client, raw):
    from reconciliation.actions import open_escalation
    from reconciliation.models import Escalation

    escalation = open_escalation(sandbox_agents(people, 1)[0], None, reason="look at this")
    client.force_login(people.bob)
    for form in ({"triage": "assign"}, {"resolution": "acknowledge", "comment": "seen"}):
        response = client.post("/escalations/", {"escalation": raw, **form})
        assert response.status_code < 500
    escalation.refresh_from_db()
    assert escalation.assignee is None and escalation.status == "open"
    assert Escalation.objects.count() == 1


def test_an_approver_cannot_triage_an_escalation_about_an_agent_they_own(people, client):
    from config.errors import NotAllowed
    from reconciliation.models import Escalation
    from registry.choices import Role

    registry_actions.grant_role(people.bob, Role.OWNER, actor="system:test")
    manifest = refund_manifest()
    object.__setattr__(manifest, "owner", "bob")
    (outcome,) = registry_actions.apply_manifests([manifest], actor=people.bob, source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.carol)
    escalation = actions.open_escalation(outcome.version.agent, None, reason="bob's agent")
    for how in ({"assign": True}, {"acknowledge": True}, {"snooze_for": timedelta(days=7)}):
        with pytest.raises(NotAllowed, match="Four eyes"):
            actions.triage_escalation(escalation.pk, actor=people.bob, **how)
    client.force_login(people.bob)
    client.post("/escalations/", {"escalation": escalation.pk, "triage": "snooze_1d"})
    escalation = Escalation.objects.get(pk=escalation.pk)
    assert escalation.snoozed_until is None and escalation.assignee is None
    actions.triage_escalation(escalation.pk, actor=people.carol, assign=True)  # another may


def test_the_inbox_is_one_queue_and_its_count_is_served_for_live_updates(people, client,
                                                                        api_as):
    (agent,) = sandbox_agents(people, 1)
    registry_actions.propose(agent, refund_manifest(model="gpt-5").spec,
                             agent.active_version.metadata, actor=people.alice, source="api")
    escalation = actions.open_escalation(agent, None, reason="drift for a human")
    counts = api_as(people.bob).get("/api/v1/inbox").json()
    assert len(counts.pop("items")) == 2
    assert counts == {"proposals": 1, "escalations": 1, "decisions": 0, "requests": 0,
                      "recertifications": 0, "total": 2,
                      "count": 2, "next": None, "previous": None}  # one page
    client.force_login(people.bob)
    page = client.get("/approvals/").content.decode()
    assert "drift for a human" in page and 'id="inbox-count"' in page and ">2<" in page
    actions.triage_escalation(escalation.pk, actor=people.bob,
                              snooze_for=timedelta(hours=1))
    assert api_as(people.bob).get("/api/v1/inbox").json()["total"] == 1
    from reconciliation.models import AlertEvent

    assert AlertEvent.objects.filter(event="proposal.pending", agent_name=agent.name).exists()


def test_the_overview_draws_the_newest_alerts_so_a_fresh_feed_is_not_empty(people, client):
    from console.reconciliation_pages import FEED_HISTORY
    from reconciliation.alerts import broadcast

    client.force_login(people.dana)
    assert "No alerts yet." in client.get("/").content.decode()
    for index in range(FEED_HISTORY + 5):
        broadcast("drift.detected", {"agent": f"agent-{index:02d}", "severity": "high",
                                     "kind": "tool_added", "pointer": "/tools/2",
                                     "link": f"/agents/agent-{index:02d}/"})
    page = client.get("/").content.decode()
    drawn = re.findall(r'<li data-id="(\d+)" data-event="drift.detected" '
                       r'data-agent="(agent-\d+)"', page)
    assert [agent for _, agent in drawn] == [f"agent-{i:02d}" for i in range(
        FEED_HISTORY + 4, 4, -1)]  # the newest FEED_HISTORY, newest first
    assert f'data-last-id="{drawn[0][0]}"' in page
    assert ('<a href="/agents/agent-24/">agent-24 gained tool 2 (high severity)</a>') in page


def grow_inbox(people, start: int, count: int) -> str:
    """Pending proposals, escalations (one snoozed), and pending decisions, `count` each."""
    for agent in sandbox_agents(people, count, start=start):
        registry_actions.propose(agent, refund_manifest(model="gpt-5").spec,
                                 agent.active_version.metadata, actor=people.alice,
                                 source="api")
        drift_and_correct(agent)
        escalation = actions.open_escalation(agent, agent.findings.first(), reason="look")
        actions.triage_escalation(escalation.pk, actor=people.carol, assign=True)
        runtime_actions.request_decision(agent, {"action": "payments.refund", "amount": 800},
                                 actor=people.alice)
    snoozed = actions.open_escalation(agent, None, reason="later")
    actions.triage_escalation(snoozed.pk, actor=people.bob, snooze_for=timedelta(hours=1))
    return "/approvals/"


def grow_proposal(people, start: int, count: int) -> str:
    """One pending proposal whose backtest reads more events, under more guardrails, beside
    more of its agent's versions."""
    import uuid

    from django.utils import timezone

    from runtime.models import BehaviourEvent

    agent = Agent.objects.filter(name="refund-agent").first() or approved_agent(
        people, "refund-agent")
    for index in range(start, start + count):
        registry_actions.create_guardrail(actor=people.dana, name=f"rule-{index}",
                                          effect="warn", expression="true", message="noted")
        old = registry_actions.propose(agent, refund_manifest(version=f"3.{index}.0").spec,
                                       agent.active_version.metadata, actor=people.alice,
                                       source="api").version
        registry_actions.withdraw_proposal(old.pk, actor=people.alice)
    BehaviourEvent.objects.bulk_create([BehaviourEvent(
        event_id=uuid.uuid4().hex, agent=agent, agent_name=agent.name, ts=timezone.now(),
        kind="action", action="payments.refund", amount=100 + i) for i in range(count * 50)])
    pending = agent.versions.filter(state="pending", proposed_by=people.admin).first() or (
        registry_actions.propose(agent, refund_manifest(tools=["orders.lookup"]).spec,
                                 agent.active_version.metadata, actor=people.admin,
                                 source="api").version)
    return f"/proposals/{pending.pk}/"


def grow_lab(people, start: int, count: int) -> str:
    for agent in sandbox_agents(people, count, start=start):
        drift_and_correct(agent)
    return "/lab/"


def grow_guardrails(people, start: int, count: int) -> str:
    for index in range(start, start + count):
        registry_actions.create_guardrail(
            actor=people.dana, name=f"rule-{index}", effect="require_approvals",
            required_approvals=2, selector={"team": f"team-{index}"},
            expression='spec.data.all(d, d.access != "admin")', message="admin is rare")
    return "/guardrails/"


@pytest.mark.parametrize("grow, viewer", [(grow_inbox, "bob"), (grow_proposal, "bob"),
                                          (grow_lab, "dana"), (grow_guardrails, "dana")])
def test_more_pages_use_a_fixed_number_of_queries_whatever_their_rows(
        people, client, grow, viewer, django_assert_max_num_queries):
    client.force_login(getattr(people, viewer))
    path = grow(people, 0, 2)
    with django_assert_max_num_queries(40) as few:
        assert client.get(path).status_code == 200
    assert grow(people, 2, 5) == path
    with django_assert_max_num_queries(40) as many:
        response = client.get(path)
    assert response.status_code == 200
    assert len(many.captured_queries) == len(few.captured_queries)
    body = response.content.decode()  # what grew is on the page
    if grow is grow_inbox:
        assert body.count('class="card escalation"') == 14  # 7 drift, 7 decisions
        assert body.count('class="card proposal"') == 7
    else:
        assert ("agent-06" if grow is grow_lab else "rule-6") in body
