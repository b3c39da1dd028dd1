"""The API reads a request's body as strictly as a manifest (config/strict_input.py): a field
the endpoint does not take is refused, never ignored (a misspelled optional field used to
leave its default in force: a group rule meant to block was saved to escalate), a value of the
wrong JSON type is refused, never converted, and a form instead of JSON is refused. Each
refusal is the documented error naming the field, and changes nothing."""

from pathlib import Path

import pytest
import yaml
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.urls import get_resolver
from rest_framework import fields, serializers

from audit.models import AuditEntry
from config.strict_input import QuerySerializer, Serializer, StrictBody, type_problem
from gitsource.policies import read_policies
from gitsource.policy_tests import PolicyError
from reconciliation.models import AgentStatus, ObservedState
from registry.models import Guardrail, Waiver
from runtime.models import Decision, GroupRule

pytestmark = pytest.mark.django_db

BLOCKING_RULE = {"name": "payments-tokens", "selector": {"team": "payments"},
                 "match": {"kind": "model_call"}, "measure": "tokens", "limit": 10000,
                 "per": "1h", "effect": "block"}
GUARDRAIL = {"name": "no-crm-in-prod", "selector": {"env": "prod"}, "effect": "deny",
             "expression": '!("crm.search" in spec.tools)',
             "message": "production agents never search the CRM"}


def refused(response, status: int = 400) -> dict[str, str]:
    """The refusal's details, pointer -> message (asserting the documented shape)."""
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == {400: "malformed", 415: "unsupported_media_type"}[status]
    return {d["pointer"]: d["message"] for d in error["details"]}


def test_a_misspelled_effect_no_longer_saves_a_blocking_rule_as_escalate(api_as, people):
    dana = api_as(people.dana)
    rule = {**BLOCKING_RULE}
    rule["efect"] = rule.pop("effect")
    audited = AuditEntry.objects.count()
    details = refused(dana.post("/api/v1/group-rules", rule, format="json"))
    assert list(details) == ["/efect"]
    assert details["/efect"].startswith("unknown field; expected one of across_owners, ")
    assert "effect" in details["/efect"] and "created_by" not in details["/efect"]
    assert not GroupRule.objects.exists() and AuditEntry.objects.count() == audited
    # spelled right, the same body saves the rule as meant
    saved = dana.post("/api/v1/group-rules", BLOCKING_RULE, format="json")
    assert saved.status_code == 201, saved.content
    assert GroupRule.objects.get().effect == "block"
    # and a change that misspells its field changes nothing either
    details = refused(dana.patch("/api/v1/group-rules/payments-tokens", {"limt": 5},
                                 format="json"))
    assert list(details) == ["/limt"]
    assert GroupRule.objects.get().limit == 10000


def test_siblings_refuse_unknown_fields_too(api_as, people, refund_agent):
    dana, bob = api_as(people.dana), api_as(people.bob)
    assert list(refused(dana.post("/api/v1/guardrails", {
        **GUARDRAIL, "overdue_efect": "suspend"}, format="json"))) == ["/overdue_efect"]
    assert not Guardrail.objects.exists()
    assert list(refused(bob.post("/api/v1/agents/refund-agent/waivers", {
        "pointer": "/tools/-", "reason": "incident 7", "ticket": "INC-7", "duration": "8h",
        "opt": "123456"}, format="json"))) == ["/opt"]
    assert not Waiver.objects.exists()
    assert list(refused(dana.post("/api/v1/agents/refund-agent/shadow", {
        "enabled": True, "duration": "8h", "reasn": "a migration"}, format="json"))) == [
        "/reasn"]
    assert not AgentStatus.objects.filter(agent__name="refund-agent", shadow=True).exists()


def test_fields_read_back_and_sent_again_are_ignored_when_the_server_sets_them(api_as, people):
    """A client that reads a guardrail and sends it back changed: its created_at, updated_at
    and created_by are the server's, ignored as Kubernetes ignores an object's status."""
    dana = api_as(people.dana)
    assert dana.post("/api/v1/guardrails", GUARDRAIL, format="json").status_code == 201
    read = dana.get("/api/v1/guardrails/no-crm-in-prod").json()
    read["message"] = "never the CRM in production"
    written = dana.put("/api/v1/guardrails/no-crm-in-prod", read, format="json")
    assert written.status_code == 200, written.content
    assert written.json()["created_at"] == read["created_at"]
    assert Guardrail.objects.get().message == "never the CRM in production"


@pytest.mark.parametrize("field, value, pointer, message", [
    ("enabled", "false", "/enabled", "expected true or false; got 'false'"),
    ("enabled", 0, "/enabled", "expected true or false; got 0"),
    ("required_approvals", "2", "/required_approvals", "expected a whole number; got '2'"),
    ("required_approvals", 2.0, "/required_approvals", "expected a whole number; got 2.0"),
    ("required_approvals", True, "/required_approvals", "expected a whole number; got true"),
    ("message", 404, "/message", "expected a string; got 404"),
    ("effect", ["deny"], "/effect", "expected a string; got a list"),
    ("safe_tools", ["search", 5], "/safe_tools/1", "expected a string; got 5"),
    ("selector", {"env": 1}, "/selector/env", "expected a string; got 1"),
    ("selector", ["env"], "/selector", "expected a mapping; got a list"),
])
def test_a_value_of_the_wrong_json_type_is_refused_not_converted(
        api_as, people, field, value, pointer, message):
    dana = api_as(people.dana)
    details = refused(dana.post("/api/v1/guardrails", {**GUARDRAIL, field: value},
                                format="json"))
    assert details == {pointer: message}
    assert not Guardrail.objects.exists()


def test_a_switch_sent_as_text_is_refused_and_the_cluster_stays_as_it_was(api_as, people):
    dana = api_as(people.dana)
    before = dana.get("/api/v1/control").json()
    for value in ("true", "on", 1):
        assert refused(dana.post("/api/v1/control/shadow", {"enabled": value},
                                 format="json")) == {
            "/enabled": f"expected true or false; got {value!r}"}
    assert dana.get("/api/v1/control").json() == before


def test_a_form_is_refused_where_json_is_read(api_as, people):
    """A form's values are all text: the API reads JSON (or the raw text of a manifest or an
    event batch) and refuses a form with 415 before any field is read."""
    dana = api_as(people.dana)
    before = dana.get("/api/v1/control").json()
    response = dana.post("/api/v1/control/shadow", {"enabled": "true"}, format="multipart")
    assert refused(response, 415) == {}
    assert "multipart/form-data" in response.json()["error"]["message"]
    urlencoded = dana.post("/api/v1/group-rules", "name=x&measure=events&limit=5&per=1h",
                           content_type="application/x-www-form-urlencoded")
    refused(urlencoded, 415)
    assert dana.get("/api/v1/control").json() == before and not GroupRule.objects.exists()


def test_a_git_policy_with_a_value_of_the_wrong_type_is_refused():
    """A group rule kept in Git is read by the API's own serializer: a quoted limit is refused
    there too, naming the file and the field."""
    text = ("apiVersion: governance/v1\nkind: GroupRule\nmetadata: {name: payments-tokens}\n"
            "spec:\n  measure: tokens\n  limit: '10000'\n  per: 1h\n  effect: block\n")
    with pytest.raises(PolicyError, match=r"rules.yaml: group rule payments-tokens: "
                                          r"/spec/limit: expected a number; got '10000'"):
        read_policies({"rules.yaml": text})
    assert read_policies({"rules.yaml": text.replace("'10000'", "10000")}).rules[
        "group_rule"]["payments-tokens"]["limit"] == 10000


class Choosing(Serializer):
    level = serializers.ChoiceField(choices=[(1, "low"), (2, "high")])
    kind = serializers.ChoiceField(choices=["a", "b"])
    when = serializers.DateTimeField(required=False)
    anything = serializers.JSONField(required=False)
    maybe = serializers.IntegerField(required=False, allow_null=True)


def test_choices_keep_their_own_type_and_json_fields_take_anything():
    assert Choosing(data={"level": 1, "kind": "a", "anything": ["x", 1, None],
                          "maybe": None}).is_valid()
    wrong = Choosing(data={"level": True, "kind": "a"})
    assert not wrong.is_valid()
    assert [str(m) for m in wrong.errors["level"]] == ["expected a whole number; got true"]
    checked = Choosing(data={"level": "1", "kind": 1, "when": 1700000000})
    assert not checked.is_valid()
    assert {k: [str(m) for m in v] for k, v in checked.errors.items()} == {
        "level": ["expected a whole number; got '1'"], "kind": ["expected a string; got 1"],
        "when": ["expected a string; got 1700000000"]}
    assert type_problem(fields.FloatField(), 3) is None
    assert type_problem(fields.FloatField(), "3.5") == "expected a number; got '3.5'"


def test_every_serializer_of_the_product_reads_strictly_or_names_query_strings():
    """A new body serializer on DRF's own base would read leniently again (ruff's banned-api
    stops the import; this stops a base reached some other way)."""
    assert get_resolver().url_patterns  # every API module imported, whatever ran before
    ours = tuple(f"{config.name}." for config in apps.get_app_configs()
                 if not Path(config.path).is_relative_to(settings.BASE_DIR / ".venv")
                 and Path(config.path).is_relative_to(settings.BASE_DIR))
    found, lenient = [], []
    todo = [serializers.Serializer]
    while todo:
        kind = todo.pop()
        todo.extend(kind.__subclasses__())
        if kind.__module__.startswith(ours) and not kind.__module__.startswith("tests."):
            found.append(kind)
            if not issubclass(kind, StrictBody | QuerySerializer):
                lenient.append(f"{kind.__module__}.{kind.__qualname__}")
    assert len(found) > 40 and lenient == []


def test_the_schema_says_a_body_takes_no_field_it_does_not_declare(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    components = yaml.safe_load(out.read_text())["components"]["schemas"]
    for name in ("GroupRuleRequest", "PatchedGroupRuleRequest", "WaiverRequest",
                 "AgentSwitchRequest"):
        assert components[name]["additionalProperties"] is False, name
    assert "additionalProperties" not in components["GroupRule"]  # what the server answers


def test_a_what_if_reads_the_rule_as_saving_it_would(api_as, people):
    """The group rule's what-if judges its body itself; `"per_record": "false"` was replayed
    as a per-record rule (any non-empty text is true), a rule saving would refuse."""
    dana = api_as(people.dana)
    reads = {"match": {"kind": "data_access"}, "measure": "events", "limit": 5, "per": "1h"}
    assert refused(dana.post("/api/v1/group-rules/what-if", {**reads, "per_record": "false"},
                             format="json")) == {
        "/per_record": "expected true or false; got 'false'"}
    assert list(refused(dana.post("/api/v1/group-rules/what-if", {**reads, "efect": "block"},
                                  format="json"))) == ["/efect"]
    answered = dana.post("/api/v1/group-rules/what-if", {**reads, "per_record": False,
                                                         "name": "reads"}, format="json")
    assert answered.status_code == 200, answered.content


def test_a_key_named_twice_in_one_object_is_refused(agent_client):
    """`{"amount": 10, "amount": 100000}`: the first to one reader, the last to another
    (Python's json took the last); which was meant cannot be told, as a manifest's YAML
    already refuses."""
    decisions = Decision.objects.count()
    response = agent_client.generic(
        "POST", "/api/v1/agents/refund-agent/decisions",
        b'{"action": "payments.refund", "amount": 10, "amount": 100000}',
        content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["message"] == (
        "JSON parse error - the key 'amount' appears twice in one object")
    nested = agent_client.generic(
        "PUT", "/api/v1/agents/refund-agent/observed-state",
        b'{"tools": ["orders.lookup"], "limits": [{"resource": "a", "resource": "b"}]}',
        content_type="application/json")
    assert nested.status_code == 400 and "'resource' appears twice" in str(nested.json())
    assert Decision.objects.count() == decisions and not ObservedState.objects.exists()
    once = agent_client.generic("POST", "/api/v1/agents/refund-agent/decisions",
                                b'{"action": "payments.refund", "amount": 10}',
                                content_type="application/json")
    assert once.status_code == 201, once.content
