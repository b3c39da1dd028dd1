"""`POST /api/v1/agents/{name}/decisions` as an agent author (or a prompt-injected model) would
try it: every amount the refund rule cannot read is a deny that names the rule, every field it
does not know is a 400 naming the field, and an action the spec never names is denied unless
the spec opens it (docs/decisions.md)."""

from datetime import timedelta

import pytest

from reconciliation.models import Escalation
from runtime.models import Decision
from tests.conftest import approved_with_client

PATH = "/api/v1/agents/refund-agent/decisions"


def ask(client, body):
    return client.post(PATH, body, format="json")


@pytest.mark.django_db
@pytest.mark.parametrize("arguments, missing", [
    ({"order": "A-1"}, "no amount was sent"),
    ({"order": "A-1", "Amount": 800}, "arguments has 'Amount', not 'amount'"),
    ({"order": "A-1", "refund_amount": 800}, "arguments has 'refund_amount'"),
    ({"amount": True}, "a boolean is not an amount"),
    ({"amount": -800}, "between 0 and 1e12"),
    ({"amount": "-800"}, "not a plain decimal"),
    ({"amount": "800 dollars"}, "not a plain decimal"),
    ({"amount": "1e3"}, "not a plain decimal"),
    ({"amount": {"value": 800}}, "dict is not an amount"),
    ({"amount": [800]}, "list is not an amount"),
    ({"amount": None}, "null is not an amount"),
])
def test_a_refund_whose_amount_cannot_be_read_is_denied_naming_the_rule(agent_client,
                                                                        arguments, missing):
    answer = ask(agent_client, {"tool": "payments.refund", "arguments": arguments})
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["outcome"] == "deny", body
    assert body["rule"].startswith("actions/payments.refund/max: the rule reads the amount")
    assert missing in body["rule"]
    assert not Escalation.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("body", [
    {"action": "payments.refund"},
    {"tool": "payments.refund"},
    {"tool": "payments.refund", "action": "payments.refund"},
])
def test_a_refund_with_no_amount_at_all_is_denied(agent_client, body):
    answer = ask(agent_client, body).json()
    assert answer["outcome"] == "deny" and "no amount was sent" in answer["rule"]


@pytest.mark.django_db
@pytest.mark.parametrize("body, outcome", [
    ({"tool": "payments.refund", "arguments": {"order": "A-1", "amount": "800"}}, "pending"),
    ({"tool": "payments.refund", "arguments": {"amount": "800.50"}}, "pending"),
    ({"tool": "payments.refund", "arguments": {"amount": 120}}, "allow"),
    ({"tool": "payments.refund", "arguments": {"amount": "120.5"}}, "allow"),
    ({"tool": "payments.refund", "arguments": {"amount": "6000"}}, "deny"),
    ({"action": "payments.refund", "amount": "800"}, "pending"),
    ({"action": "payments.refund", "amount": 800.0}, "pending"),
    ({"action": "payments.refund", "amount": 800, "arguments": {"amount": "800"}}, "pending"),
])
def test_a_number_or_a_plain_decimal_string_is_read_once_and_judged(agent_client, body,
                                                                    outcome):
    answer = ask(agent_client, body).json()
    assert answer["outcome"] == outcome, answer
    decision = Decision.objects.get(pk=answer["id"])
    assert isinstance(decision.request["amount"], float)  # stored as read, not as sent
    assert decision.request["action"] == "payments.refund"


@pytest.mark.django_db
@pytest.mark.parametrize("arguments", [{"amount": 50}, {"amount": "50"}, {"amount": "x"},
                                       {"amount": True}])
def test_two_amounts_that_disagree_are_denied(agent_client, arguments):
    # The gate would judge $50 while the tool refunded $800 (or something unreadable).
    answer = ask(agent_client, {"tool": "payments.refund", "amount": 800,
                                "arguments": arguments}).json()
    assert answer["outcome"] == "deny" and answer["rule"].startswith("amount:")


@pytest.mark.django_db
@pytest.mark.parametrize("body, pointer", [
    ({"action": "payments.refund", "Amount": 800}, "/Amount"),
    ({"action": "payments.refund", "amount": 800, "amt": 1}, "/amt"),
    ({"tool": "payments.refund", "args": {"amount": 800}}, "/args"),
    ({"action": "payments.refund", "amount": True}, "/amount"),
    ({"action": "payments.refund", "amount": -800}, "/amount"),
    ({"action": "payments.refund", "amount": "eight hundred"}, "/amount"),
    ({"action": "payments.refund", "amount": float("1e13")}, "/amount"),
    ({"action": "payments.refund", "amount": {"value": 800}}, "/amount"),
    ({"tool": 7}, "/tool"),
    ({"tool": ""}, "/tool"),
    ({"tool": "payments.refund", "arguments": [800]}, "/arguments"),
    ({"tool": "payments.refund", "arguments": "amount=800"}, "/arguments"),
    ({"tool": "payments.refund", "arguments": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {
        "h": {"i": 1}}}}}}}}}}, "/arguments"),
    ({"tool": "payments.refund", "arguments": {"note": "x" * 20000}}, "/arguments"),
    ({"action": "payments.refund", "amount": 10, "wait_seconds": "30"}, "/wait_seconds"),
    ({"action": "payments.refund", "amount": 10, "wait_seconds": 0}, "/wait_seconds"),
    ({"action": "payments.refund", "amount": 10, "wait_seconds": True}, "/wait_seconds"),
    ({"amount": 800}, ""),
    ({"a/b~c": 1, "tool": "payments.refund"}, "/a~1b~0c"),
])
def test_unknown_fields_and_wrong_types_are_refused_naming_the_field(agent_client, body,
                                                                     pointer):
    answer = ask(agent_client, body)
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] == "malformed"
    assert error["details"][0]["pointer"] == pointer
    assert not Decision.objects.exists()


@pytest.mark.django_db
def test_an_action_the_spec_never_names_is_denied_by_its_default(people):
    agent, client = approved_with_client(people)
    answer = ask(client, {"action": "crm.export"}).json()
    assert answer["outcome"] == "deny"
    assert answer["rule"].startswith("unlisted_actions: crm.export is neither")
    assert "default for such actions is deny" in answer["rule"]
    # An approved tool with no action rule stays allowed, whether named as a tool or an action.
    assert ask(client, {"tool": "orders.lookup"}).json()["outcome"] == "allow"
    looked = ask(client, {"action": "orders.lookup"}).json()
    assert looked["outcome"] == "allow" and looked["rule"].startswith("tools/orders.lookup")
    # A tool outside the approved set is denied whatever action it claims to be.
    unapproved = ask(client, {"tool": "crm.export", "action": "orders.lookup"}).json()
    assert unapproved["outcome"] == "deny" and unapproved["rule"].startswith("tools:")


@pytest.mark.django_db
def test_a_spec_may_open_unnamed_actions_and_that_does_not_open_its_rules(people):
    agent, client = approved_with_client(people, unlisted_actions="allow")
    assert agent.active_version.spec["unlisted_actions"] == "allow"
    opened = ask(client, {"action": "crm.note"}).json()
    assert opened["outcome"] == "allow" and opened["rule"].startswith("unlisted_actions:")
    # The refund still has its rule, and its rule still needs its amount.
    assert ask(client, {"action": "payments.refund"}).json()["outcome"] == "deny"


@pytest.mark.django_db
def test_the_decision_names_the_rule_it_applied(agent_client):
    small = ask(agent_client, {"action": "payments.refund", "amount": 120}).json()
    assert small["rule"] == ("actions/payments.refund: payments.refund of $120 is within its "
                             "max and approval_above")
    held = ask(agent_client, {"tool": "payments.refund", "arguments": {"amount": "800"}}).json()
    assert held["rule"] == ("actions/payments.refund/approval_above: payments.refund of $800 is "
                            "above $500: a human must sign off")
    huge = ask(agent_client, {"action": "payments.refund", "amount": 6000}).json()
    assert huge["rule"].startswith("actions/payments.refund/max: payments.refund of $6,000 is "
                                   "above the maximum $5,000")


@pytest.mark.django_db
def test_a_pending_decision_expires_when_the_asking_agent_stops_waiting(agent_client,
                                                                        settings):
    settings.DECISION_TIMEOUT_SECONDS = 300
    short = ask(agent_client, {"tool": "payments.refund", "arguments": {"amount": 800},
                               "wait_seconds": 20}).json()
    decision = Decision.objects.get(pk=short["id"])
    assert decision.status == "pending"
    assert abs((decision.expires_at - decision.created_at) - timedelta(seconds=20)) < timedelta(
        seconds=1)
    assert decision.request["wait_seconds"] == 20
    # Longer than the server waits: the server's timeout holds.
    long = Decision.objects.get(pk=ask(agent_client, {
        "action": "payments.refund", "amount": 800, "wait_seconds": 3600}).json()["id"])
    assert abs((long.expires_at - long.created_at) - timedelta(seconds=300)) < timedelta(
        seconds=1)
