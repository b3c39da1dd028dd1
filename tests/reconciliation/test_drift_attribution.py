"""Drift attribution: each finding says what caused it when anything knows (the platform's
change log through the http connector, the drift lab's deployment, the agent's own proposal),
else unknown; findings of one cause share its key, the API filters and groups by it and the
audit entry carries it."""

import pytest

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.attribution import split_change
from reconciliation.models import Finding
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, approved_agent, refund_manifest, token_client
from tests.reconciliation.platform_server import Platform
from tests.reconciliation.test_http_connector import SECRET, allow_platform, http_agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def platform(monkeypatch, settings):
    monkeypatch.setenv("PLATFORM_SECRET", SECRET)
    with Platform(SECRET) as server:
        allow_platform(settings, server)
        yield server


def causes(agent):
    return {(f.kind, f.cause_key) for f in Finding.objects.filter(agent=agent)}


def test_split_change_takes_only_well_formed_change_fields():
    assert split_change({"tools": [], "change_id": "CHG-7", "changed_by": "deploy-bot"}) == (
        {"tools": []}, {"kind": "platform_change", "key": "change:CHG-7", "change_id": "CHG-7",
                        "actor": "deploy-bot", "verified": False, "reported_by": "platform"})
    assert split_change({"tools": [], "changed_by": "eve"})[1]["key"] == "changed-by:eve"
    assert split_change({"tools": [], "change_id": 7, "changed_by": " "}) == ({"tools": []},
                                                                             None)


def test_the_platforms_change_log_names_the_cause_of_every_finding_it_made(
        people, platform, api_as):
    agent = http_agent(people, platform)  # two drifts: crm.search added, the $500 rule dropped
    platform.states["refund-agent"].update(change_id="CHG-1042", changed_by="deploy-bot")
    actions.reconcile_agent(agent.pk, trigger="manual")
    assert causes(agent) == {("tool_added", "change:CHG-1042"),
                             ("action_limit_missing", "change:CHG-1042")}
    finding = Finding.objects.filter(agent=agent).first()
    assert finding.cause == {"kind": "platform_change", "key": "change:CHG-1042",
                             "change_id": "CHG-1042", "actor": "deploy-bot",
                             "verified": False, "reported_by": "platform (http connector)"}
    opened = AuditEntry.objects.filter(action="finding.opened", agent="refund-agent")
    assert {e.after["cause"]["key"] for e in opened} == {"change:CHG-1042"}
    # the change fields are the platform's log, not the agent's state
    assert "change_id" not in agent.observations.order_by("observed_at").first().state
    listed = api_as(people.dana).get("/api/v1/findings", {"cause": "change:CHG-1042"}).json()
    assert len(listed["results"]) == 2
    assert api_as(people.dana).get("/api/v1/findings",
                                   {"cause": "unknown"}).json()["results"] == []
    (group,) = api_as(people.dana).get("/api/v1/findings/causes").json()["results"]
    assert (group["key"], group["findings"], group["agents"]) == ("change:CHG-1042", 2, 1)
    assert group["cause"]["actor"] == "deploy-bot"
    assert api_as(people.alice).get("/api/v1/findings/causes").status_code == 403


def test_a_drift_lab_deployment_is_the_cause_with_its_actor(people):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "log"})
    actions.reconcile_agent(agent.pk, trigger="manual")  # the sandbox deploys it as approved
    sandbox_actions.sandbox_deploy(agent, actor="system:deploy-bot", changes=BAD_DEPLOYMENT,
                           reason="friday release")
    actions.reconcile_agent(agent.pk, trigger="observation")
    keys = {key for _, key in causes(agent)}
    assert len(keys) == 1 and next(iter(keys)).startswith("deployment:")
    finding = Finding.objects.filter(agent=agent).first()
    assert finding.cause["actor"] == "system:deploy-bot"
    assert finding.cause["reason"] == "friday release"
    assert Finding.objects.filter(agent=agent).count() == 3  # crm tool, crm data, $500 rule


def test_the_agents_own_proposal_explains_drift_it_proposed_and_the_rest_is_unknown(people):
    agent = approved_agent(people, "refund-agent", connector={"type": "push"},
                           enforcement={"default": "log"})
    client = token_client(people, agent)
    proposed = refund_manifest(tools=["crm.search", "orders.lookup", "payments.refund"],
                               connector={"type": "push"}, enforcement={"default": "log"})
    response = client.post("/api/v1/agents/refund-agent/proposals",
                           {"spec": proposed.spec}, format="json")
    assert response.status_code == 201, response.json()
    proposal = response.json()["proposal"]
    state = {k: v for k, v in proposed.spec.items() if k != "enforcement"}
    state["model"] = "gpt-5"  # not in its proposal: nobody says why
    assert client.put("/api/v1/agents/refund-agent/observed-state", state,
                      format="json").status_code == 202
    actions.reconcile_agent(agent.pk, trigger="observation")
    assert causes(agent) == {("tool_added", f"proposal:{proposal}"),
                             ("model_mismatch", "unknown")}


def test_a_push_report_may_name_its_change_too(people):
    agent = approved_agent(people, "refund-agent", connector={"type": "push"},
                           enforcement={"default": "log"})
    client = token_client(people, agent)
    state = {k: v for k, v in agent.active_version.spec.items() if k != "enforcement"}
    report = {**state, "model": "gpt-5", "change_id": "rollout-88", "changed_by": "ci"}
    assert client.put("/api/v1/agents/refund-agent/observed-state", report,
                      format="json").status_code == 202
    actions.reconcile_agent(agent.pk, trigger="observation")
    # its own report: keyed under its name, so it never joins another agent's change
    assert causes(agent) == {("model_mismatch", "agent:refund-agent:change:rollout-88")}
    bad = client.put("/api/v1/agents/refund-agent/observed-state",
                     {**state, "change_id": ["not", "a", "string"]}, format="json")
    assert bad.status_code == 202  # an unusable change field is dropped, never a 500


def test_the_findings_page_shows_each_cause_and_filters_by_it(people, client):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "log"})
    actions.reconcile_agent(agent.pk, trigger="manual")
    sandbox_actions.sandbox_deploy(agent, actor="system:deploy-bot", changes=BAD_DEPLOYMENT,
                           reason="friday release")
    actions.reconcile_agent(agent.pk, trigger="observation")
    key = Finding.objects.filter(agent=agent).first().cause_key
    client.force_login(people.dana)
    page = client.get("/findings/", {"cause": key}).content.decode()
    assert page.count(f'class="cause" href="?cause={key.replace(":", "%3A")}"') == 3
    assert "by system:deploy-bot" in page
    assert "0 findings" in client.get("/findings/", {"cause": "unknown"}).content.decode()
