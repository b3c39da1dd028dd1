"""What-if for a guardrail before compliance turns it on: the last week's proposals (as
proposed, when proposed) and observed states (what agents really ran) judged by it, with exact
counts per outcome and agent; compliance only; a bad expression changes nothing."""

from datetime import timedelta

import pytest
from django.utils import timezone

from reconciliation.models import ObservedState
from registry import actions
from registry.choices import VersionSource
from registry.models import DesiredStateVersion, Guardrail
from tests.conftest import approved_agent, refund_manifest, token_client

pytestmark = pytest.mark.django_db

NO_CRM = '!("crm.export" in spec.tools)'


def propose(people, name: str, **spec) -> DesiredStateVersion:
    manifest = refund_manifest(**spec)
    object.__setattr__(manifest, "name", name)
    (outcome,) = actions.apply_manifests([manifest], actor=people.alice,
                                         source=VersionSource.YAML)
    return outcome.version


def test_a_guardrail_replayed_over_the_weeks_proposals_and_observations(people, api_as):
    crm_tools = ["crm.export", "orders.lookup", "payments.refund"]
    approved_agent(people, "refund-a")
    approved_agent(people, "refund-b")
    propose(people, "refund-a", tools=crm_tools)
    old = propose(people, "refund-b", tools=crm_tools)
    DesiredStateVersion.objects.filter(pk=old.pk).update(
        created_at=timezone.now() - timedelta(days=8))  # before the week: not judged
    agent = approved_agent(people, "refund-c")
    ObservedState.objects.create(agent=agent, state={**agent.active_version.spec,
                                                     "tools": crm_tools},
                                 state_sha256="x", source="push", reported_by="agent:refund-c")
    dana = api_as(people.dana)
    body = {"expression": NO_CRM, "effect": "deny", "message": "no CRM exports",
            "selector": {"env": "prod"}}
    result = dana.post("/api/v1/guardrails/what-if", body, format="json").json()
    proposals, observed = result["proposals"], result["observations"]
    assert (proposals["judged"], proposals["outcomes"]["denied"],
            proposals["outcomes"]["passed"]) == (4, 1, 3)
    assert proposals["agents"] == [{"agent": "refund-a", "denied": 1}]
    assert proposals["examples"][0]["agent"] == "refund-a"
    assert (observed["judged"], observed["outcomes"]["denied"]) == (1, 1)
    assert observed["agents"] == [{"agent": "refund-c", "denied": 1}]
    warn = dana.post("/api/v1/guardrails/what-if", {**body, "effect": "warn",
                                                    "selector": {"env": "dev"}},
                     format="json").json()
    assert warn["proposals"]["judged"] == 0  # no agent labelled env=dev
    assert not Guardrail.objects.exists()  # nothing saved by a what-if
    actions.create_guardrail(actor=people.dana, name="no-crm", expression=NO_CRM,
                             effect="require_approvals", message="two people for CRM")
    saved = dana.get("/api/v1/guardrails/no-crm/what-if").json()
    assert saved["proposals"]["outcomes"]["requires_approvals"] == 1


def test_only_compliance_runs_it_and_a_bad_expression_is_a_422(people, api_as):
    agent = approved_agent(people, "refund-a")
    body = {"expression": NO_CRM, "effect": "deny", "message": "m"}
    for client in (api_as(people.alice), api_as(people.bob), token_client(people, agent)):
        assert client.post("/api/v1/guardrails/what-if", body,
                           format="json").status_code == 403
    bad = api_as(people.dana).post("/api/v1/guardrails/what-if",
                                   {**body, "expression": "spec.tools.("}, format="json")
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_expression"
    assert api_as(people.dana).get("/api/v1/guardrails/none/what-if").status_code == 404
