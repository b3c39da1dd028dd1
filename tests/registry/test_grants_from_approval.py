"""Grants counted from approval: the owner writes a duration instead of a fixed end, and the
clock starts when the grant is approved, so a slow review does not eat it."""

from datetime import timedelta

import pytest
import yaml

from audit.models import AuditEntry
from reconciliation.models import ReconcileRun
from registry.models import Agent, DesiredStateVersion
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import REFUND_AGENT_YAML, eventually, token_client

YAML = "application/yaml"
CRM = {"resource": "crm", "access": "read", "reason": "Q4 audit"}


def manifest_with(*grants: dict, **spec: object) -> str:
    document = yaml.safe_load(REFUND_AGENT_YAML)
    document["spec"]["grants"] = list(grants)
    document["spec"].update(spec)
    return yaml.safe_dump(document)


def snapshot() -> tuple:
    return (Agent.objects.count(), DesiredStateVersion.objects.count(),
            AuditEntry.objects.count())


@pytest.mark.django_db
def test_a_slow_review_does_not_eat_a_grant_counted_from_approval(people, api_as):
    alice, bob = api_as(people.alice), api_as(people.bob)
    response = alice.generic("POST", "/api/v1/manifests",
                             manifest_with({**CRM, "duration": "1h", "starts": "approval"}),
                             content_type=YAML)
    assert response.status_code == 201, response.json()
    (result,) = response.json()["results"]
    assert "+ grant crm read for 1h from approval (Q4 audit)" in [
        c["text"] for c in result["changes"]]
    # The review takes three hours: a fixed end written at proposal time would have passed.
    DesiredStateVersion.objects.filter(pk=result["proposal"]).update(
        created_at=DesiredStateVersion.objects.get(pk=result["proposal"]).created_at
        - timedelta(hours=3))
    assert bob.post(f"/api/v1/proposals/{result['proposal']}/approve", {},
                    format="json").status_code == 200
    version = DesiredStateVersion.objects.get(pk=result["proposal"])
    expected_end = (version.decided_at + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    assert version.spec["grants"] == [{**CRM, "expires_at": expected_end}]

    agent = Agent.objects.get(name="refund-agent")
    desired = token_client(people, agent).get("/api/v1/agents/refund-agent/desired-state")
    assert desired.status_code == 200
    spec = desired.json()["spec"]
    assert spec["grants"] == [{**CRM, "expires_at": expected_end}]
    assert {"resource": "crm", "access": "read"} in spec["data"]  # live now
    started = AuditEntry.objects.get(action="grant.started")
    assert (started.actor, started.agent) == ("bob", "refund-agent")
    assert started.after == {**CRM, "expires_at": expected_end, "duration": "1h"}


@pytest.mark.django_db
@pytest.mark.parametrize("grant, pointer", [
    ({**CRM, "duration": "1h", "expires_at": "2030-01-01T00:00:00Z"}, "/spec/grants/0"),
    (CRM, "/spec/grants/0"),
    ({**CRM, "expires_at": "2030-01-01T00:00:00Z", "starts": "approval"},
     "/spec/grants/0/starts"),
    ({**CRM, "duration": "1h", "starts": "proposal"}, "/spec/grants/0/starts"),
    ({**CRM, "duration": "forever"}, "/spec/grants/0/duration"),
    ({**CRM, "duration": "31d"}, "/spec/grants/0/duration"),
    ({**CRM, "duration": 3600}, "/spec/grants/0/duration"),
])
def test_a_grant_says_one_clock_and_bad_ones_change_nothing(people, api_as, grant, pointer):
    alice = api_as(people.alice)
    before = snapshot()
    response = alice.generic("POST", "/api/v1/manifests", manifest_with(grant),
                             content_type=YAML)
    assert response.status_code == 422, response.json()
    assert pointer in [d["pointer"] for d in response.json()["error"]["details"]]
    assert snapshot() == before


@pytest.mark.django_db
def test_guardrails_judge_a_grant_counted_from_approval_as_if_approved_now(people, api_as):
    # Writing a duration instead of a date must not slip past a guardrail on grant ends.
    dana = api_as(people.dana)
    assert dana.post("/api/v1/guardrails", {
        "name": "grants-within-a-day", "effect": "deny", "message": "grants end within a day",
        "expression": 'spec.grants.all(g, timestamp(g.expires_at) <= now + duration("24h"))',
    }, format="json").status_code == 201
    alice = api_as(people.alice)
    before = snapshot()
    refused = alice.generic("POST", "/api/v1/manifests",
                            manifest_with({**CRM, "duration": "2d"}), content_type=YAML)
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "guardrail_denied"
    assert snapshot() == before
    allowed = alice.generic("POST", "/api/v1/manifests",
                            manifest_with({**CRM, "duration": "12h"}), content_type=YAML)
    assert allowed.status_code == 201, allowed.json()
    (result,) = allowed.json()["results"]
    assert result["held"] is False
    assert [g["outcome"] for g in result["guardrails"]] == ["passed"]


def test_a_worker_revokes_a_grant_counted_from_approval_when_its_duration_ends(
        people, api_as, start_worker):
    worker = start_worker()
    alice, bob = api_as(people.alice), api_as(people.bob)
    response = alice.generic("POST", "/api/v1/manifests", manifest_with(
        {**CRM, "duration": "10s"}, enforcement={"default": "correct"}), content_type=YAML)
    (result,) = response.json()["results"]
    assert bob.post(f"/api/v1/proposals/{result['proposal']}/approve", {},
                    format="json").status_code == 200
    agent = Agent.objects.get(name="refund-agent")
    sandbox_actions.ensure_sandbox(agent)  # deployed as approved, grant included

    def crm_held() -> bool:
        state = SandboxAgent.objects.get(agent=agent).state
        return any(d["resource"] == "crm" for d in state["data"])

    assert crm_held()
    run = eventually(
        lambda: ReconcileRun.objects.filter(agent=agent, trigger="grant_expired").first(),
        timeout=60, message=lambda: f"no pass at the grant's end; worker said:\n{worker.output()}")
    assert not crm_held()
    assert [c["op"] for c in run.changes] == ["remove_data"]
    version = DesiredStateVersion.objects.get(pk=result["proposal"])
    end = (version.decided_at + timedelta(seconds=10)).isoformat().replace("+00:00", "Z")
    assert version.spec["grants"] == [{**CRM, "expires_at": end}]
    assert agent.versions.count() == 1  # no new proposal was needed
