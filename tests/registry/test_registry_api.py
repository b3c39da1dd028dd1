"""The registry API as owners, approvers, compliance and agents use it, and every bad input
answering with the documented JSON error and changing nothing."""

import json

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient

from audit.models import AuditEntry
from registry import actions
from registry.models import Agent, DesiredStateVersion
from tests.conftest import REFUND_AGENT_YAML

pytestmark = pytest.mark.django_db


def post_yaml(client: APIClient, text: str | bytes, query: str = ""):
    return client.generic("POST", f"/api/v1/manifests{query}", text,
                          content_type="application/yaml")


def snapshot() -> tuple:
    return (Agent.objects.count(), DesiredStateVersion.objects.count(), AuditEntry.objects.count())


def test_owner_registers_an_agent_and_an_approver_approves_it(people, api_as):
    alice, bob = api_as(people.alice), api_as(people.bob)
    created = post_yaml(alice, REFUND_AGENT_YAML)
    assert created.status_code == 201
    (result,) = created.json()["results"]
    assert (result["agent"], result["action"], result["state"]) == (
        "refund-agent", "created", "pending")
    assert "+ tool payments.refund" in [c["text"] for c in result["changes"]]

    inbox = bob.get("/api/v1/proposals?state=pending").json()["results"]
    assert [p["id"] for p in inbox] == [result["proposal"]]
    approved = bob.post(f"/api/v1/proposals/{result['proposal']}/approve",
                        {"comment": "ok"}, format="json")
    assert approved.status_code == 200 and approved.json()["state"] == "approved"
    assert approved.json()["approvals"] == ["bob"]

    detail = alice.get("/api/v1/agents/refund-agent").json()
    assert detail["generation"] == 1 and detail["owner"] == "alice"
    assert detail["active_spec"]["actions"] == {
        "payments.refund": {"approval_above": 500, "max": 5000}}
    assert post_yaml(alice, REFUND_AGENT_YAML).json()["results"][0]["action"] == "unchanged"


def test_json_manifests_and_many_documents_in_one_body(people, api_as):
    doc = yaml.safe_load(REFUND_AGENT_YAML)
    second = json.loads(json.dumps(doc))
    second["metadata"]["name"] = "returns-agent"
    body = json.dumps(doc) + "\n---\n" + json.dumps(second)
    response = post_yaml(api_as(people.alice), body)
    assert response.status_code == 201
    assert [r["agent"] for r in response.json()["results"]] == ["refund-agent", "returns-agent"]


def test_dry_run_validates_and_diffs_only(people, api_as):
    before = snapshot()
    response = post_yaml(api_as(people.alice), REFUND_AGENT_YAML, "?dry_run=1")
    after_token = snapshot()
    assert response.status_code == 200
    body = response.json()
    assert body["dry_run"] is True and body["results"][0]["action"] == "created"
    assert body["results"][0]["proposal"] is None
    assert after_token[:2] == before[:2]
    assert after_token[2] == before[2] + 1  # only api_as's token issue was audited


def test_the_bad_deployment_diff_reads_in_plain_language(people, api_as, refund_agent):
    bad = yaml.safe_load(REFUND_AGENT_YAML)
    bad["spec"]["tools"].append("crm.search")
    bad["spec"]["data"].append({"resource": "crm", "access": "write"})
    bad["spec"]["actions"]["payments.refund"] = {"max": 5000}
    response = post_yaml(api_as(people.alice), yaml.safe_dump(bad))
    (result,) = response.json()["results"]
    assert [c["text"] for c in result["changes"]] == [
        "+ tool crm.search",
        "+ crm write",
        "payments.refund approval threshold $500 → removed",
    ]
    assert {d["pointer"] for d in result["diff"]} >= {"/actions/payments.refund/approval_above"}


BAD_MANIFESTS = [
    ("malformed yaml", "apiVersion: governance/v1\nkind: [Agent\n", 400, "malformed", ""),
    ("unknown field", REFUND_AGENT_YAML.replace("  framework:", "  colour: red\n  framework:"),
     422, "invalid", "/spec/colour"),
    ("bad slug", REFUND_AGENT_YAML.replace("name: refund-agent", "name: Refund_Agent"),
     422, "invalid", "/metadata/name"),
    ("bad duration", REFUND_AGENT_YAML.replace("40, per: 1h", "40, per: 1 hour"),
     422, "invalid", "/spec/limits/0/per"),
    ("zone-less grant", REFUND_AGENT_YAML + "  grants:\n    - {resource: crm, access: read, "
     "expires_at: '2026-12-04T00:00:00', reason: audit}\n", 422, "invalid",
     "/spec/grants/0/expires_at"),
    ("threshold above max", REFUND_AGENT_YAML.replace("above: 500", "above: 9000"),
     422, "invalid", "/spec/actions/payments.refund/approval_above"),
    ("duplicate tool", REFUND_AGENT_YAML.replace("[orders.lookup, payments.refund]",
                                                 "[orders.lookup, orders.lookup]"),
     422, "invalid", "/spec/tools/1"),
    ("wrong type", REFUND_AGENT_YAML.replace("model: gpt-4.1", "model: [gpt]"), 422, "invalid",
     "/spec/model"),
    ("yaml bomb", "a: &a [x, x]\nb: [*a, *a]\n", 400, "malformed", ""),
    ("not utf-8", b"apiVersion: \xff\xfe\n", 400, "malformed", ""),
    ("empty body", "", 422, "invalid", ""),
    ("huge number", REFUND_AGENT_YAML.replace("max: 5000", "max: 1e300"), 422, "invalid",
     "/spec/actions/payments.refund/max"),
    ("markup name", REFUND_AGENT_YAML.replace("name: refund-agent", "name: <script>"), 422,
     "invalid", "/metadata/name"),
    ("unknown owner", REFUND_AGENT_YAML.replace("owner: alice", "owner: nobody"), 403,
     "forbidden", "/metadata/owner"),
]


@pytest.mark.parametrize("case, body, status, code, pointer", BAD_MANIFESTS,
                         ids=[c[0] for c in BAD_MANIFESTS])
def test_bad_manifests_get_the_documented_error_and_change_nothing(
        people, api_as, case, body, status, code, pointer):
    client = api_as(people.alice)
    before = snapshot()
    response = post_yaml(client, body)
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    if pointer:
        assert pointer in [d["pointer"] for d in error["details"]]
    assert snapshot() == before


def test_oversize_bodies_get_413(people, api_as, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    before = snapshot()
    response = post_yaml(api_as(people.alice), REFUND_AGENT_YAML + "#" * 4096)
    assert response.status_code == 413 and response.json()["error"]["code"] == "too_large"
    assert snapshot()[:2] == before[:2]


@pytest.mark.parametrize("who, status", [("bob", 403), ("dana", 403), (None, 401)])
def test_only_owners_apply_manifests(people, api_as, who, status):
    client = api_as(getattr(people, who)) if who else APIClient()
    before = snapshot()
    assert post_yaml(client, REFUND_AGENT_YAML).status_code == status
    assert snapshot()[:2] == before[:2]


def test_an_agent_proposes_its_own_desired_state_with_its_token(people, refund_agent, capsys):
    call_command("api_token", "alice", "--agent", "refund-agent")
    key = capsys.readouterr().out.strip()
    agent_client = APIClient()
    agent_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    spec = dict(refund_agent.active_version.spec, version="2.4.0")
    response = agent_client.post("/api/v1/agents/refund-agent/proposals",
                                 {"spec": spec, "base_generation": 1}, format="json")
    assert response.status_code == 201, response.content
    proposal = DesiredStateVersion.objects.get(pk=response.json()["proposal"])
    assert proposal.source == "agent" and proposal.state == "pending"
    assert response.json()["changes"] == [
        {"area": "runtime", "risk": "neutral", "text": "version 2.3.0 → 2.4.0",
         "pointer": "/version", "before": "2.3.0", "after": "2.4.0"}]
    # An agent token is not a person: it cannot read the registry, approve, or touch others.
    assert agent_client.get("/api/v1/agents").status_code == 403
    assert agent_client.post(f"/api/v1/proposals/{proposal.pk}/approve").status_code == 403
    other = agent_client.post("/api/v1/agents/ghost/proposals", {"spec": spec}, format="json")
    assert other.status_code == 403


def test_proposals_with_an_invalid_spec_or_stale_generation_are_refused(people, api_as,
                                                                        refund_agent):
    alice = api_as(people.alice)
    before = snapshot()
    spec = dict(refund_agent.active_version.spec, tools=["Bad Tool"])
    invalid = alice.post("/api/v1/agents/refund-agent/proposals", {"spec": spec}, format="json")
    assert invalid.status_code == 422
    assert invalid.json()["error"]["details"][0]["pointer"] == "/spec/tools/0"
    good = dict(refund_agent.active_version.spec, model="gpt-5")
    stale = alice.post("/api/v1/agents/refund-agent/proposals",
                       {"spec": good, "base_generation": 0}, format="json")
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_generation"
    missing = alice.post("/api/v1/agents/nope/proposals", {"spec": good}, format="json")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert snapshot()[:2] == before[:2]


def test_four_eyes_refusals_over_the_api_leave_no_state_change(people, api_as, refund_agent):
    actions.grant_role(people.alice, "approver", actor="system:test")
    alice = api_as(people.alice)
    spec = dict(refund_agent.active_version.spec, model="gpt-5")
    proposal = alice.post("/api/v1/agents/refund-agent/proposals", {"spec": spec},
                          format="json").json()["proposal"]
    before = snapshot()
    refused = alice.post(f"/api/v1/proposals/{proposal}/approve", {}, format="json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "four_eyes"
    assert snapshot() == before
    bob = api_as(people.bob)
    assert bob.post(f"/api/v1/proposals/{proposal}/reject", {}, format="json").status_code == 422
    gone = bob.post("/api/v1/proposals/999999/approve", {}, format="json")
    assert gone.status_code == 404


def test_agent_list_filters(people, api_as, refund_agent):
    alice = api_as(people.alice)
    names = lambda query: [a["name"] for a in alice.get(f"/api/v1/agents{query}").json()["results"]]  # noqa: E731
    assert names("") == ["refund-agent"]
    assert names("?owner=alice&label=team=payments&framework=langgraph&q=refund") == [
        "refund-agent"]
    assert names("?label=team=support") == []
    assert names("?status=suspended") == []
    bad = alice.get("/api/v1/agents?label=nolabel")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["pointer"] == "/label"
