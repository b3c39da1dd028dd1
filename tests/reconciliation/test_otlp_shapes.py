"""Malformed OTLP on /v1/traces, as a broken or hostile exporter sends it: every shape, JSON or
protobuf, gets the JSON error body (400) or a clean export answer, never a 500, and a bad
export stores nothing."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from runtime.models import BehaviourEvent

pytestmark = pytest.mark.django_db

NOW_NANOS = "1767225600000000000"


def export(span: object = None, **resource_spans: object) -> dict:
    """An OTLP JSON export with one span (or the given parts replaced)."""
    span = span if span is not None else {
        "traceId": "ab" * 16, "spanId": "cd" * 8, "startTimeUnixNano": NOW_NANOS,
        "attributes": [{"key": "gen_ai.operation.name",
                        "value": {"stringValue": "execute_tool"}}]}
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}], **resource_spans}]}


def span_with(**fields: object) -> dict:
    return {"traceId": "ab" * 16, "spanId": "cd" * 8, "startTimeUnixNano": NOW_NANOS,
            "attributes": [{"key": "gen_ai.operation.name",
                            "value": {"stringValue": "execute_tool"}}], **fields}


MALFORMED = {
    "resourceSpans a string": ({"resourceSpans": "abc"}, "/resourceSpans"),
    "a JSON array": ([1, 2], None),
    "resourceSpans holding a number": ({"resourceSpans": [1]}, "/resourceSpans/0"),
    "scopeSpans an object": ({"resourceSpans": [{"scopeSpans": {"a": 1}}]},
                             "/resourceSpans/0/scopeSpans"),
    "spans a string": ({"resourceSpans": [{"scopeSpans": [{"spans": "x"}]}]},
                       "/resourceSpans/0/scopeSpans/0/spans"),
    "a span that is a list": (export([1]), "/resourceSpans/0/scopeSpans/0/spans/0"),
    "startTimeUnixNano not a number": (export(span_with(startTimeUnixNano="abc")),
                                       "/resourceSpans/0/scopeSpans/0/spans/0/startTimeUnixNano"),
    "startTimeUnixNano past the year 9999": (
        export(span_with(startTimeUnixNano="9" * 40)),
        "/resourceSpans/0/scopeSpans/0/spans/0/startTimeUnixNano"),
    "startTimeUnixNano negative": (export(span_with(startTimeUnixNano=-5)),
                                   "/resourceSpans/0/scopeSpans/0/spans/0/startTimeUnixNano"),
    "startTimeUnixNano an object": (export(span_with(startTimeUnixNano={})),
                                    "/resourceSpans/0/scopeSpans/0/spans/0/startTimeUnixNano"),
    "attributes an object": (export(span_with(attributes={"k": "v"})),
                             "/resourceSpans/0/scopeSpans/0/spans/0/attributes"),
    "an attribute without a key": (export(span_with(attributes=[{"value": {}}])),
                                   "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/key"),
    "an attribute that is a string": (export(span_with(attributes=["x"])),
                                      "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0"),
    "intValue not an integer": (
        export(span_with(attributes=[{"key": "n", "value": {"intValue": "12x"}}])),
        "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value/intValue"),
    "stringValue a list": (
        export(span_with(attributes=[{"key": "n", "value": {"stringValue": []}}])),
        "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value/stringValue"),
    "resource a string": (export(resource="svc"), "/resourceSpans/0/resource"),
    "resource attributes a number": (export(resource={"attributes": 7}),
                                     "/resourceSpans/0/resource/attributes"),
    "traceId a number": (export(span_with(traceId=12)),
                         "/resourceSpans/0/scopeSpans/0/spans/0/traceId"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_every_malformed_otlp_json_shape_is_a_400_naming_where(agent_client, case):
    body, pointer = MALFORMED[case]
    response = agent_client.generic("POST", "/v1/traces", json.dumps(body),
                                    content_type="application/json")
    assert response.status_code == 400, (case, response.content[:300])
    error = response.json()["error"]
    assert error["code"] == "malformed" and error["message"]
    if pointer:
        assert [d["pointer"] for d in error["details"]] == [pointer]
    assert not BehaviourEvent.objects.exists()


JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                        st.floats(allow_nan=False), st.text(max_size=30),
                        st.sampled_from(["", "abc", NOW_NANOS, "9" * 30, "-1", "1e3"]))
OTLP_KEYS = st.sampled_from([
    "resourceSpans", "scopeSpans", "spans", "resource", "attributes", "key", "value",
    "stringValue", "intValue", "doubleValue", "boolValue", "traceId", "spanId",
    "startTimeUnixNano", "gen_ai.operation.name"])
JSON_SHAPES = st.recursive(JSON_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(OTLP_KEYS, inner, max_size=4)), max_leaves=25)
FUZZ = settings(max_examples=150, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def assert_clean(response) -> None:
    assert response.status_code in (200, 400), response.content[:300]
    if response.status_code == 400:
        assert set(response.json()["error"]) == {"code", "message", "details"}


def test_fuzzed_otlp_json_never_errors(agent_client):
    @FUZZ
    @given(body=st.one_of(JSON_SHAPES, st.builds(export, JSON_SHAPES),
                          st.builds(lambda s: export(s), st.dictionaries(
                              OTLP_KEYS, JSON_SHAPES, max_size=5))))
    def post(body):
        assert_clean(agent_client.generic("POST", "/v1/traces", json.dumps(body),
                                          content_type="application/json"))

    post()


VALID_PROTOBUF = ExportTraceServiceRequest.FromString(b"")
SPAN = VALID_PROTOBUF.resource_spans.add().scope_spans.add().spans.add()
SPAN.trace_id, SPAN.span_id, SPAN.start_time_unix_nano = b"\xab" * 16, b"\xcd" * 8, 1
SPAN.attributes.add(key="gen_ai.operation.name").value.string_value = "execute_tool"
PROTOBUF = VALID_PROTOBUF.SerializeToString()


def test_fuzzed_otlp_protobuf_never_errors(agent_client):
    @FUZZ
    @given(body=st.one_of(
        st.binary(max_size=300),
        st.builds(lambda at, junk: PROTOBUF[:at] + junk + PROTOBUF[at:],
                  st.integers(0, len(PROTOBUF)), st.binary(max_size=20)),
        st.builds(lambda at, byte: PROTOBUF[:at] + bytes([byte]) + PROTOBUF[at + 1:],
                  st.integers(0, len(PROTOBUF) - 1), st.integers(0, 255))))
    def post(body):
        assert_clean(agent_client.generic("POST", "/v1/traces", body,
                                          content_type="application/x-protobuf"))

    post()
