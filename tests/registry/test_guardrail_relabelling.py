"""Guardrails are not escaped by relabelling (issue 12 item 2).

Compliance's deny guardrail selects `env=prod`. An owner who proposes a forbidden tool and, in
the same proposal, relabels the agent `env=dev` is still refused: a guardrail is judged against
the agent as it is and as it would be. Label, owner and connector changes are changes: listed in
plain words, risk-scored, and named by the backtest as what past events cannot show.
"""

import uuid
from datetime import UTC, datetime

import pytest

from registry import actions
from registry.choices import Role
from registry.models import DesiredStateVersion
from tests.conftest import REFUND_AGENT_YAML, make_person, refund_manifest

CRM = ["crm.search", "orders.lookup", "payments.refund"]
PROD_LABELS = {"team": "payments", "env": "prod"}
DEV_LABELS = {"team": "payments", "env": "dev"}


@pytest.fixture
def no_crm_in_prod(api_as, people):
    response = api_as(people.dana).post("/api/v1/guardrails", {
        "name": "no-crm-in-prod", "selector": {"env": "prod"}, "effect": "deny",
        "expression": '!("crm.search" in spec.tools)',
        "message": "production agents never search the CRM"}, format="json")
    assert response.status_code == 201, response.content


def propose(client, **body):
    return client.post("/api/v1/agents/refund-agent/proposals",
                       {"spec": body.pop("spec", refund_manifest().spec), **body},
                       format="json")


def test_relabelling_to_dev_does_not_escape_a_prod_deny(api_as, people, refund_agent,
                                                        no_crm_in_prod):
    response = propose(api_as(people.alice), spec=refund_manifest(tools=CRM).spec,
                       labels=DEV_LABELS)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "guardrail_denied"
    assert "no-crm-in-prod" in error["message"]
    assert not DesiredStateVersion.objects.filter(agent=refund_agent, state="pending").exists()


def test_relabelling_either_way_is_judged_as_it_is_and_as_it_would_be(api_as, people):
    """Out of prod (as it is: refused) and into prod (as it would be: refused)."""
    dev_yaml = (REFUND_AGENT_YAML.replace("name: refund-agent", "name: dev-agent")
                .replace("env: prod", "env: dev")
                .replace("tools: [orders.lookup, payments.refund]",
                         "tools: [crm.search, orders.lookup, payments.refund]"))
    alice, bob = api_as(people.alice), api_as(people.bob)
    created = alice.generic("POST", "/api/v1/manifests", dev_yaml,
                            content_type="application/yaml").json()["results"][0]
    assert bob.post(f"/api/v1/proposals/{created['proposal']}/approve", {},
                    format="json").status_code == 200
    api_as(people.dana).post("/api/v1/guardrails", {
        "name": "no-crm-in-prod", "selector": {"env": "prod"}, "effect": "deny",
        "expression": '!("crm.search" in spec.tools)', "message": "no"}, format="json")
    into_prod = alice.generic("POST", "/api/v1/manifests", dev_yaml.replace("env: dev",
                                                                            "env: prod"),
                              content_type="application/yaml")
    assert into_prod.status_code == 422
    assert into_prod.json()["error"]["code"] == "guardrail_denied"
    # the same owner's prod agent, relabelled dev while gaining the CRM
    refund = REFUND_AGENT_YAML
    created = alice.generic("POST", "/api/v1/manifests", refund,
                            content_type="application/yaml").json()["results"][0]
    bob.post(f"/api/v1/proposals/{created['proposal']}/approve", {}, format="json")
    out_of_prod = alice.generic("POST", "/api/v1/manifests", refund.replace(
        "env: prod", "env: dev").replace("tools: [orders.lookup, payments.refund]",
                                         "tools: [crm.search, orders.lookup, payments.refund]"),
        content_type="application/yaml")
    assert out_of_prod.status_code == 422
    assert out_of_prod.json()["error"]["code"] == "guardrail_denied"


def test_a_guardrail_reading_the_labels_is_judged_as_the_agent_is_too(api_as, people,
                                                                       refund_agent):
    made = api_as(people.dana).post("/api/v1/guardrails", {
        "name": "prod-needs-the-500-rule", "effect": "deny",
        "expression": 'metadata.labels.env != "prod" || '
                      'spec.actions["payments.refund"].approval_above != null',
        "message": "production refunds above $500 need a human"}, format="json")
    assert made.status_code == 201, made.content
    response = propose(api_as(people.alice), labels=DEV_LABELS, spec=refund_manifest(
        actions={"payments.refund": {"max": 5000}}).spec)
    assert response.status_code == 422
    assert "prod-needs-the-500-rule" in response.json()["error"]["message"]


def test_a_pending_relabel_is_rejected_when_the_guardrail_arrives(api_as, people, refund_agent):
    proposed = propose(api_as(people.alice), spec=refund_manifest(tools=CRM).spec,
                       labels=DEV_LABELS)
    assert proposed.status_code == 201
    api_as(people.dana).post("/api/v1/guardrails", {
        "name": "no-crm-in-prod", "selector": {"env": "prod"}, "effect": "deny",
        "expression": '!("crm.search" in spec.tools)', "message": "no"}, format="json")
    shown = api_as(people.bob).get(f"/api/v1/proposals/{proposed.json()['proposal']}").json()
    assert shown["state"] == "rejected"
    assert "no-crm-in-prod" in shown["decision_comment"]


def test_a_labels_only_proposal_is_a_change_with_a_risk(api_as, people, refund_agent, client):
    response = propose(api_as(people.alice), labels=DEV_LABELS)
    assert response.status_code == 201, response.content
    body = response.json()
    assert [(c["text"], c["risk"]) for c in body["changes"]] == [
        ("label env: prod → dev", "widening")]
    assert body["risk"] > 0
    client.force_login(people.bob)
    page = client.get(f"/proposals/{body['proposal']}/").content.decode()
    assert "label env: prod → dev" in page
    assert "No permission changes" not in page
    # the backtest names it as something past events cannot show
    backtest = api_as(people.bob).get(f"/api/v1/proposals/{body['proposal']}/backtest").json()
    assert [c["text"] for c in backtest["not_replayed"]] == ["label env: prod → dev"]
    assert "Past events cannot show" in page


def test_a_connector_change_is_listed_with_its_url_and_secret_and_scored(api_as, people,
                                                                         refund_agent, settings):
    settings.CONNECTOR_SECRETS = ["KEY_A"]
    settings.CONNECTOR_ALLOWED_HOSTS = ["agents.example.com"]
    actions.grant_connector_secret("KEY_A", people.alice, actor=people.admin)
    http = {"type": "http", "url": "https://agents.example.com/refund", "secret_env": "KEY_A"}
    body = propose(api_as(people.alice), spec=refund_manifest(connector=http).spec).json()
    assert [(c["text"], c["risk"]) for c in body["changes"]] == [
        ("connector sandbox → http (https://agents.example.com/refund)", "widening")]
    assert body["risk"] == 10


def test_handing_the_agent_to_another_owner_is_listed_and_scored(api_as, people,
                                                                 refund_agent):
    make_person("oscar", Role.OWNER)
    handed = REFUND_AGENT_YAML.replace("owner: alice", "owner: oscar")
    response = api_as(people.alice).generic("POST", "/api/v1/manifests", handed,
                                            content_type="application/yaml")
    assert response.status_code == 201, response.content
    (result,) = response.json()["results"]
    assert [(c["text"], c["risk"]) for c in result["changes"]] == [
        ("owner alice → oscar", "widening")]
    assert result["risk"] == 10


def test_weaker_behaviour_enforcement_is_backtested(api_as, people, refund_agent):
    from tests.conftest import token_client

    agent = token_client(people, refund_agent)
    now = datetime.now(UTC).isoformat()
    sent = agent.post("/api/v1/events", [
        {"id": uuid.uuid4().hex, "agent": "refund-agent", "kind": "tool_call", "ts": now,
         "tool": "crm.search"} for _ in range(3)], format="json")
    assert sent.status_code == 200, sent.content
    enforcement = {"default": "correct", "actions": "escalate", "behaviour": "log"}
    body = propose(api_as(people.alice),
                   spec=refund_manifest(enforcement=enforcement).spec).json()
    assert ("enforcement of behaviour: block → log", "widening") in [
        (c["text"], c["risk"]) for c in body["changes"]]
    backtest = api_as(people.bob).get(f"/api/v1/proposals/{body['proposal']}/backtest").json()
    assert [c["text"] for c in backtest["changes"] if c["kind"] == "enforcement"] == [
        "would have only logged 3 flagged events instead of suspending the agent"]
