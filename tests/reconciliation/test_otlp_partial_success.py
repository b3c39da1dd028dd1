"""An OTLP export whose usage values are out of ingest's limits (negative, 1e13 tokens, not a
number) keeps its spans but says, in OTLP's partialSuccess, how many values it dropped and
why, as the OTLP specification asks; /api/v1/events refuses the same values."""

import copy
import json
import time

import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from runtime.models import BehaviourEvent
from tests.conftest import token_client


def span(index: int, *attributes) -> dict:
    return {"traceId": "ab" * 16, "spanId": f"{index:016x}",
            "startTimeUnixNano": str(time.time_ns() - 60 * 10**9),
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                           *({"key": k, "value": v} for k, v in attributes)]}


def export(*spans) -> dict:
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name",
                                     "value": {"stringValue": "refund-agent"}}]},
        "scopeSpans": [{"spans": list(spans)}]}]}


BAD = export(
    span(1, ("gen_ai.usage.input_tokens", {"intValue": "-500"}),
         ("gen_ai.usage.output_tokens", {"intValue": "20"})),
    span(2, ("gen_ai.usage.output_tokens", {"intValue": str(10**13)})),
    span(3, ("gen_ai.usage.input_tokens", {"stringValue": "lots"}),
         ("gen_ai.usage.cost", {"doubleValue": -1.5})),
    span(4, ("gen_ai.usage.input_tokens", {"intValue": "10"})))


@pytest.mark.django_db
def test_dropped_usage_values_are_counted_and_said_in_json(people, refund_agent):
    client = token_client(people, refund_agent)
    answer = client.generic("POST", "/v1/traces", json.dumps(BAD),
                            content_type="application/json")
    assert answer.status_code == 200, answer.content
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedSpans"] == 0  # every span kept: a warning, as OTLP allows
    message = partial["errorMessage"]
    assert message.startswith("4 value(s) dropped: ")
    assert "/resourceSpans/0/scopeSpans/0/spans/0 gen_ai.usage.input_tokens=-500 dropped: " \
           "must be an integer between 0 and 1e12" in message
    assert f"spans/1 gen_ai.usage.output_tokens={10**13} dropped" in message
    assert "spans/2 gen_ai.usage.input_tokens='lots' dropped" in message
    assert "spans/2 gen_ai.usage.cost=-1.5 dropped: must be a number between 0 and 1e12" \
        in message
    kept = dict(BehaviourEvent.objects.values_list("span_id", "input_tokens"))
    assert kept == {f"{1:016x}": None, f"{2:016x}": None, f"{3:016x}": None, f"{4:016x}": 10}
    assert BehaviourEvent.objects.get(span_id=f"{1:016x}").output_tokens == 20
    # The same value sent as an event is refused, with the same words.
    refused = client.post("/api/v1/events", [{
        "id": "e1", "agent": "refund-agent", "kind": "model_call", "ts": "2026-12-01T00:00:00Z",
        "input_tokens": -500}], format="json").json()
    assert refused["results"][0]["reason"].startswith("input_tokens must be an integer between "
                                                      "0 and 1e12")


@pytest.mark.django_db
def test_dropped_usage_values_are_said_in_protobuf_too(people, refund_agent):
    client = token_client(people, refund_agent)
    plain = copy.deepcopy(BAD)
    spans = plain["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for item in spans:  # ids are bytes in protobuf; set below
        del item["traceId"], item["spanId"]
    body = ParseDict(plain, ExportTraceServiceRequest())
    for index, item in enumerate(body.resource_spans[0].scope_spans[0].spans, start=1):
        item.trace_id, item.span_id = bytes.fromhex("ab" * 16), index.to_bytes(8, "big")
    answer = client.generic("POST", "/v1/traces", body.SerializeToString(),
                            content_type="application/x-protobuf")
    assert answer.status_code == 200
    reply = ExportTraceServiceResponse.FromString(answer.content)
    assert reply.partial_success.rejected_spans == 0
    assert reply.partial_success.error_message.startswith("4 value(s) dropped: ")


@pytest.mark.django_db
def test_a_clean_export_answers_an_empty_success(people, refund_agent):
    client = token_client(people, refund_agent)
    answer = client.generic("POST", "/v1/traces", json.dumps(export(
        span(1, ("gen_ai.usage.input_tokens", {"intValue": "10"})))),
        content_type="application/json")
    assert answer.json() == {}


@pytest.mark.django_db
def test_a_rejected_span_and_a_dropped_value_are_both_said(people, refund_agent):
    client = token_client(people, refund_agent)
    stranger = span(2)
    stranger["attributes"].append({"key": "gen_ai.agent.name",
                                   "value": {"stringValue": "!!!"}})
    answer = client.generic("POST", "/v1/traces", json.dumps(export(
        span(1, ("gen_ai.usage.input_tokens", {"doubleValue": 1e13})), stranger)),
        content_type="application/json").json()
    partial = answer["partialSuccess"]
    assert partial["rejectedSpans"] == 1
    assert partial["errorMessage"].startswith("1 span(s) rejected: ")
    assert " | 1 value(s) dropped: " in partial["errorMessage"]
