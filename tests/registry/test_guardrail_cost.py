"""A guardrail costly enough to stall the site (nested comprehensions over the spec's lists) is
refused with a 422 saying why, through the API and the pages, on create and update; one saved
before the budget existed is never run on a spec it would stall on, and holds the proposal."""

import pytest

from audit.models import AuditEntry
from registry.guardrail_cost import estimate_cost, parse
from registry.models import DesiredStateVersion, Guardrail

pytestmark = pytest.mark.django_db

NESTED_FOUR = ("spec.tools.all(a, spec.tools.all(b, spec.tools.all(c, "
               "spec.tools.all(d, a != 'zz'))))")
COSTLY = {
    "four nested all()": NESTED_FOUR,
    "three nested, mixed macros": ("spec.data.exists(d, spec.tools.map(t, t).filter(u, "
                                   "spec.limits.all(l, l.resource != u)).size() > 0)"),
    "nested over lists joined with +": (
        "(spec.tools + spec.tools + spec.tools + spec.tools + spec.tools).all(a, "
        "(spec.tools + spec.tools + spec.tools + spec.tools + spec.tools).all(b, a != b))"),
    "nested over a built list of lists": ("spec.tools.map(x, spec.tools + spec.tools).all(l, "
                                          "l.all(y, spec.data.all(d, y != d.resource)))"),
    "a big literal list, nested": (
        "[" + ",".join(str(i) for i in range(400)) + "].all(i, [" +
        ",".join(str(i) for i in range(400)) + "].all(j, spec.tools.all(t, i != j)))"),
}
GUARDRAIL = {"name": "cross-check", "effect": "deny", "message": "m"}


@pytest.mark.parametrize("case", list(COSTLY))
def test_a_costly_guardrail_is_a_422_saying_why_and_is_not_saved(people, api_as, case):
    dana = api_as(people.dana)
    before = (Guardrail.objects.count(), AuditEntry.objects.count())
    response = dana.post("/api/v1/guardrails", {**GUARDRAIL, "expression": COSTLY[case]},
                         format="json")
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "expression_too_costly"
    assert "budget" in error["message"] and "comprehension" in error["message"]
    assert error["details"][0]["pointer"] == "/expression"
    assert (Guardrail.objects.count(), AuditEntry.objects.count()) == before


def test_updating_a_guardrail_to_a_costly_expression_is_refused(people, api_as):
    dana = api_as(people.dana)
    assert dana.post("/api/v1/guardrails", {**GUARDRAIL, "expression": "true"},
                     format="json").status_code == 201
    for method in ("patch", "put"):
        response = getattr(dana, method)("/api/v1/guardrails/cross-check",
                                         {**GUARDRAIL, "expression": NESTED_FOUR}, format="json")
        assert response.status_code == 422, response.content
        assert response.json()["error"]["code"] == "expression_too_costly"
    assert Guardrail.objects.get().expression == "true"


def test_the_guardrail_pages_refuse_it_too(client, people):
    client.force_login(people.dana)
    form = {**GUARDRAIL, "description": "", "selector": "", "required_approvals": "2",
            "enabled": "on"}
    response = client.post("/guardrails/new", {**form, "expression": NESTED_FOUR})
    assert response.status_code == 200 and "too costly" in response.content.decode()
    assert not Guardrail.objects.exists()
    assert client.post("/guardrails/new", {**form, "expression": "true"}).status_code == 302
    response = client.post("/guardrails/cross-check/edit", {**form, "expression": NESTED_FOUR})
    assert "too costly" in response.content.decode()
    assert Guardrail.objects.get().expression == "true"


def test_one_level_of_nesting_over_the_largest_lists_is_allowed(people, api_as, refund_agent):
    expression = "spec.data.all(d, spec.tools.all(t, t != d.resource))"
    response = api_as(people.dana).post("/api/v1/guardrails",
                                        {**GUARDRAIL, "expression": expression}, format="json")
    assert response.status_code == 201, response.content
    spec = {**refund_agent.active_version.spec, "tools": [f"tool.{i}" for i in range(200)]}
    proposed = api_as(people.alice).post("/api/v1/agents/refund-agent/proposals",
                                         {"spec": spec}, format="json")
    assert proposed.status_code == 201, proposed.content
    assert [g["outcome"] for g in proposed.json()["guardrails"]] == ["passed"]


def test_a_costly_guardrail_saved_before_the_budget_holds_proposals_without_running(
        people, api_as, refund_agent):
    # As if saved by an earlier release: straight into the table, no check.
    Guardrail.objects.create(name="legacy", expression=NESTED_FOUR, effect="deny", message="m",
                             created_by=people.dana)
    spec = {**refund_agent.active_version.spec, "tools": [f"tool.{i}" for i in range(60)]}
    response = api_as(people.alice).post("/api/v1/agents/refund-agent/proposals",
                                         {"spec": spec}, format="json")
    assert response.status_code == 201, response.content
    (result,) = response.json()["guardrails"]
    assert result["outcome"] == "error" and "budget" in result["message"]
    assert response.json()["held"] is True
    version = DesiredStateVersion.objects.get(pk=response.json()["proposal"])
    assert version.held and version.state == "pending"


def test_the_estimate_multiplies_nested_comprehensions():
    one = estimate_cost(parse("spec.tools.all(t, t != 'x')"), largest_collection=200)
    two = estimate_cost(parse("spec.tools.all(a, spec.tools.all(b, a != b))"),
                        largest_collection=200)
    assert 200 <= one < 2_000 and 200 * 200 <= two < 200 * 2_000
