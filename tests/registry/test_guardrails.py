"""Compliance's guardrails: the demo's three policies, bad CEL refused at save, evaluation
errors failing closed, and a changed guardrail re-evaluating pending proposals."""

import pytest
import yaml

from audit.models import AuditEntry
from config.errors import Invalid, NotAllowed
from registry import actions
from registry.choices import VersionSource
from registry.models import DesiredStateVersion, Guardrail
from tests.conftest import REFUND_AGENT_YAML, refund_manifest

pytestmark = pytest.mark.django_db

CRM_WRITE = ('!spec.data.exists(d, d.resource == "crm" && d.access in ["write", "admin"]) && '
             '!spec.grants.exists(g, g.resource == "crm" && g.access in ["write", "admin"])')
REFUND_CAP = ('!("payments.refund" in spec.actions) || '
              '(spec.actions["payments.refund"].approval_above != null && '
              'spec.actions["payments.refund"].approval_above <= 1000)')
GRANTS_90_DAYS = 'spec.grants.all(g, timestamp(g.expires_at) <= now + duration("2160h"))'


@pytest.fixture
def guardrails(people):
    actions.create_guardrail(actor=people.dana, name="crm-write-two-approvers",
                             expression=CRM_WRITE, effect="require_approvals",
                             required_approvals=2,
                             message="write or admin on crm needs two approvers")
    actions.create_guardrail(actor=people.dana, name="refund-threshold-cap",
                             expression=REFUND_CAP, effect="deny",
                             message="refunds above $1,000 always need a human")
    actions.create_guardrail(actor=people.dana, name="grants-expire-in-90-days",
                             expression=GRANTS_90_DAYS, effect="warn",
                             message="grants should expire within 90 days")


def propose(people, agent, **spec):
    return actions.propose(agent, refund_manifest(**spec).spec, agent.active_version.metadata,
                           actor=people.alice, source=VersionSource.API)


def test_deny_refuses_the_proposal_with_the_guardrails_message_and_changes_nothing(
        people, refund_agent, guardrails, api_as):
    before = (DesiredStateVersion.objects.count(), AuditEntry.objects.count())
    with pytest.raises(Invalid) as refused:
        propose(people, refund_agent,
                actions={"payments.refund": {"approval_above": 2000, "max": 5000}})
    assert refused.value.code == "guardrail_denied"
    assert "refunds above $1,000 always need a human" in refused.value.message
    assert (DesiredStateVersion.objects.count(), AuditEntry.objects.count()) == before
    bad = yaml.safe_load(REFUND_AGENT_YAML)
    bad["spec"]["actions"]["payments.refund"] = {"max": 5000}  # threshold dropped
    response = api_as(people.alice).generic("POST", "/api/v1/manifests", yaml.safe_dump(bad),
                                            content_type="application/yaml")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "guardrail_denied"
    assert response.json()["error"]["details"][0]["guardrail"] == "refund-threshold-cap"


def test_require_approvals_needs_that_many_distinct_approvers(people, refund_agent, guardrails):
    version = propose(people, refund_agent,
                      data=[{"resource": "orders_db", "access": "read"},
                            {"resource": "crm", "access": "write"}]).version
    assert version.required_approvals == 2
    actions.approve_proposal(version.pk, actor=people.bob)
    assert DesiredStateVersion.objects.get(pk=version.pk).state == "pending"
    actions.approve_proposal(version.pk, actor=people.carol)
    assert DesiredStateVersion.objects.get(pk=version.pk).state == "approved"


def test_warn_is_recorded_and_does_not_block(people, refund_agent, guardrails):
    version = propose(people, refund_agent, grants=[
        {"resource": "crm", "access": "read", "expires_at": "2030-01-01T00:00:00Z",
         "reason": "long"}]).version
    results = {r["guardrail"]: r["outcome"] for r in version.guardrail_results}
    assert results == {"crm-write-two-approvers": "passed", "refund-threshold-cap": "passed",
                       "grants-expire-in-90-days": "warned"}
    assert version.required_approvals == 1


def test_selectors_limit_a_guardrail_to_matching_agents(people, refund_agent):
    actions.create_guardrail(actor=people.dana, name="support-only", expression="false",
                             effect="deny", message="never", selector={"team": "support"})
    assert propose(people, refund_agent, model="gpt-5").version.state == "pending"


@pytest.mark.parametrize("expression, message", [
    ("spec.tools.size( > 1", "Syntax error"),
    ("unknown_thing == 1", "Undefined variable or function: 'unknown_thing'"),
    ("1 + 2", "must be a boolean"),
    ("", "empty"),
])
def test_bad_cel_is_refused_at_save_with_the_parsers_message(people, expression, message):
    before = (Guardrail.objects.count(), AuditEntry.objects.count())
    with pytest.raises(Invalid) as refused:
        actions.create_guardrail(actor=people.dana, name="bad", expression=expression,
                                 effect="deny", message="m")
    assert refused.value.code == "invalid_expression"
    assert message in refused.value.message
    assert (Guardrail.objects.count(), AuditEntry.objects.count()) == before


def test_syntax_errors_carry_line_and_column_over_the_api(people, api_as):
    response = api_as(people.dana).post("/api/v1/guardrails", {
        "name": "bad", "expression": "spec.tools.size() >", "effect": "deny", "message": "m",
    }, format="json")
    assert response.status_code == 422
    (detail,) = response.json()["error"]["details"]
    assert (detail["pointer"], detail["line"], detail["column"]) == ("/expression", 1, 20)


def test_evaluation_errors_fail_closed_and_hold_the_proposal(people, refund_agent):
    actions.create_guardrail(actor=people.dana, name="typed",
                             expression='spec.actions["payments.refund"].max < 10000',
                             effect="deny", message="max must stay under 10000")
    version = propose(people, refund_agent, actions={"gifts.send": {"max": 10}}).version
    (result,) = version.guardrail_results
    assert result["outcome"] == "error" and "held" in result["message"]
    assert version.held
    with pytest.raises(Exception, match="held"):
        actions.approve_proposal(version.pk, actor=people.bob)


@pytest.mark.parametrize("expression, error", [
    ('spec.data[0].access != "admin"', "index out of bounds"),          # IndexError
    ("size(spec.tools) / size(spec.data) < 100", "division by zero"),   # ZeroDivisionError
    ("9223372036854775807 + size(spec.tools) > 0", "overflow"),         # OverflowError
])
def test_any_evaluation_error_holds_the_proposal_over_the_api(people, refund_agent, api_as,
                                                               expression, error):
    actions.create_guardrail(actor=people.dana, name="fragile", expression=expression,
                             effect="deny", message="m")
    body = api_as(people.alice).post(
        "/api/v1/agents/refund-agent/proposals",
        {"spec": {**refund_agent.active_version.spec, "data": []}}, format="json")
    assert body.status_code == 201, body.content
    (result,) = body.json()["guardrails"]
    assert result["outcome"] == "error" and error in result["message"].lower()
    assert body.json()["held"] is True
    version = DesiredStateVersion.objects.get(pk=body.json()["proposal"])
    assert version.held and version.state == "pending"


def test_changing_a_guardrail_re_evaluates_pending_proposals(people, refund_agent):
    version = propose(people, refund_agent, model="gpt-5").version
    guardrail = actions.create_guardrail(actor=people.dana, name="models", effect="warn",
                                         expression='spec.model == "gpt-4.1"', message="m")
    assert DesiredStateVersion.objects.get(pk=version.pk).guardrail_results[0]["outcome"] == (
        "warned")
    actions.update_guardrail(guardrail, actor=people.dana, effect="deny",
                             message="only gpt-4.1 is approved")
    rejected = DesiredStateVersion.objects.get(pk=version.pk)
    assert rejected.state == "rejected"
    assert rejected.decision_comment == "refused by guardrail models: only gpt-4.1 is approved"
    entries = list(AuditEntry.objects.filter(target=f"proposal:{version.pk}")
                   .values_list("action", "actor"))
    assert entries[-2:] == [("proposal.reevaluated", "dana"), ("proposal.rejected", "dana")]


def test_only_compliance_manages_guardrails(people, api_as):
    with pytest.raises(NotAllowed):
        actions.create_guardrail(actor=people.alice, name="x", expression="true",
                                 effect="warn", message="m")
    response = api_as(people.bob).post("/api/v1/guardrails", {
        "name": "x", "expression": "true", "effect": "warn", "message": "m"}, format="json")
    assert response.status_code == 403
    assert api_as(people.bob).get("/api/v1/guardrails").status_code == 200
    assert Guardrail.objects.count() == 0


def test_every_guardrail_change_is_audited_with_before_and_after(people):
    guardrail = actions.create_guardrail(actor=people.dana, name="g", expression="true",
                                         effect="warn", message="m")
    actions.update_guardrail(guardrail, actor=people.dana, message="changed")
    actions.delete_guardrail(Guardrail.objects.get(name="g"), actor=people.dana)
    entries = list(AuditEntry.objects.filter(target="guardrail:g").order_by("seq"))
    assert [(e.action, e.actor) for e in entries] == [
        ("guardrail.created", "dana"), ("guardrail.updated", "dana"),
        ("guardrail.deleted", "dana")]
    assert entries[1].before["message"] == "m" and entries[1].after["message"] == "changed"
    assert entries[2].after is None and entries[2].before["name"] == "g"


def test_lowering_required_approvals_activates_a_proposal_that_already_has_enough(
        people, refund_agent, guardrails, django_capture_on_commit_callbacks):
    version = propose(people, refund_agent,
                      data=[{"resource": "orders_db", "access": "read"},
                            {"resource": "crm", "access": "write"}]).version
    actions.approve_proposal(version.pk, actor=people.bob)  # one of the two it needs
    assert DesiredStateVersion.objects.get(pk=version.pk).state == "pending"
    waiting = actions.propose(refund_agent, refund_manifest(model="gpt-5").spec,
                              refund_agent.active_version.metadata, actor=people.admin,
                              source=VersionSource.API).version  # needs one, has none
    crm_rule = Guardrail.objects.get(name="crm-write-two-approvers")
    with django_capture_on_commit_callbacks(execute=True):
        actions.delete_guardrail(crm_rule, actor=people.dana)
    activated = DesiredStateVersion.objects.get(pk=version.pk)
    assert (activated.state, activated.required_approvals, activated.decided_by) == (
        "approved", 1, people.bob)
    refund_agent.refresh_from_db()
    assert refund_agent.active_version_id == version.pk and refund_agent.generation == 2
    trail = list(AuditEntry.objects.filter(agent="refund-agent").values_list(
        "action", "actor", "target"))
    assert ("proposal.reevaluated", "dana", f"proposal:{version.pk}") in trail
    assert [entry[:2] for entry in trail[-2:]] == [("version.activated", "bob"),
                                                   ("agent.review_date_set", "bob")]
    # The newer proposal never had an approval: lowering a rule does not decide it.
    assert DesiredStateVersion.objects.get(pk=waiting.pk).state == "pending"
