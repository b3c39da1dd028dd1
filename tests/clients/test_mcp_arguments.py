"""A call's arguments against the approved input schema, read strictly: what the upstream's
lax validation would coerce or ignore is refused before the call is forwarded."""

from agentgov.mcp_arguments import argument_problems

REFUND = {"type": "object", "additionalProperties": False,
          "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
          "required": ["order_id", "amount"]}


def test_the_approved_shape_passes():
    assert argument_problems(REFUND, {"order_id": "42", "amount": 800}) == []
    assert argument_problems(REFUND, {"order_id": "42", "amount": 800.5}) == []


def test_a_string_a_float_string_a_missing_and_a_misspelled_amount_are_each_named():
    assert argument_problems(REFUND, {"order_id": "42", "amount": "800"}) == [
        "/amount: '800' is not of type 'number'"]
    assert argument_problems(REFUND, {"order_id": "42", "amount": "800.50"}) == [
        "/amount: '800.50' is not of type 'number'"]
    assert argument_problems(REFUND, {"order_id": "42"}) == [
        "/: 'amount' is a required property"]
    assert argument_problems(REFUND, {"order_id": "42", "Amount": 800}) == [
        "/: 'amount' is a required property",
        "/: Additional properties are not allowed ('Amount' was unexpected)"]
    assert argument_problems(REFUND, {"order_id": "42", "amount": True}) == [
        "/amount: True is not of type 'number'"]


def test_an_integer_field_refuses_a_numeric_string_and_a_fraction():
    credit = {"type": "object", "properties": {"cents": {"type": "integer"}}}
    assert argument_problems(credit, {"cents": "800"}) == ["/cents: '800' is not of type 'integer'"]
    assert argument_problems(credit, {"cents": 8.5}) == ["/cents: 8.5 is not of type 'integer'"]
    assert argument_problems(credit, {"cents": 800}) == []


def test_format_is_an_annotation_but_a_schema_that_cannot_be_checked_refuses_every_call():
    assert argument_problems({"properties": {"at": {"type": "string", "format": "date"}}},
                             {"at": "not a date"}) == []
    (invalid,) = argument_problems({"type": "no-such-type"}, {})
    assert "not valid JSON Schema" in invalid
    (remote,) = argument_problems({"$ref": "https://schemas.example/refund.json"}, {})
    assert "cannot be checked" in remote
