"""OTLP/HTTP: spans exported by the real OpenTelemetry SDK become behaviour events, with only
exporter settings (endpoint and a token header) on the agent's side."""

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from reconciliation.events import spans_to_events
from reconciliation.models import BehaviourEvent
from registry import actions as registry_actions


def test_an_sdk_export_becomes_events(live_server_process, people, refund_agent):
    _, key = registry_actions.issue_agent_token(refund_agent, actor=people.alice)
    exporter = OTLPSpanExporter(endpoint=f"{live_server_process.url}/v1/traces",
                                headers={"Authorization": f"Token {key}"})
    provider = TracerProvider(resource=Resource.create({"service.name": "refund-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("refund-agent")
    with tracer.start_as_current_span("execute_tool orders.lookup") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("gen_ai.tool.name", "orders.lookup")
        span.set_attribute("gen_ai.agent.name", "refund-agent")
        span.set_attribute("governance.resource", "orders_db")
        span.set_attribute("governance.record", "order-17")
        trace_id = format(span.get_span_context().trace_id, "032x")
    with tracer.start_as_current_span("chat gpt-4.1") as span:  # not a tool call: ignored
        span.set_attribute("gen_ai.operation.name", "chat")
    with tracer.start_as_current_span("execute_tool payments.refund") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("gen_ai.tool.name", "payments.refund")
        span.set_attribute("governance.action", "payments.refund")
        span.set_attribute("governance.amount", 120.0)
    assert provider.force_flush()
    provider.shutdown()
    events = list(BehaviourEvent.objects.order_by("ts").values(
        "agent_name", "kind", "tool", "resource", "record", "action", "amount", "source",
        "trace_id"))
    assert events == [
        {"agent_name": "refund-agent", "kind": "tool_call", "tool": "orders.lookup",
         "resource": "orders_db", "record": "order-17", "action": "", "amount": None,
         "source": "otlp", "trace_id": trace_id},
        {"agent_name": "refund-agent", "kind": "action", "tool": "payments.refund",
         "resource": "", "record": "", "action": "payments.refund", "amount": 120.0,
         "source": "otlp", "trace_id": events[1]["trace_id"]},
    ]
    assert all(e["trace_id"] and len(e["trace_id"]) == 32 for e in events)


def test_otlp_json_maps_by_the_genai_conventions():
    payload = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name",
                                     "value": {"stringValue": "svc"}}]},
        "scopeSpans": [{"spans": [
            {"traceId": "ab" * 16, "spanId": "cd" * 8, "startTimeUnixNano": "1767225600000000000",
             "attributes": [
                 {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                 {"key": "gen_ai.tool.name", "value": {"stringValue": "crm.search"}},
                 {"key": "gen_ai.agent.id", "value": {"stringValue": "crm-enricher"}}]},
        ]}]}]}
    assert spans_to_events(payload) == [{
        "id": f"otel-{'ab' * 16}-{'cd' * 8}", "agent": "crm-enricher",
        "ts": "2026-01-01T00:00:00+00:00", "kind": "tool_call", "trace_id": "ab" * 16,
        "span_id": "cd" * 8, "tool": "crm.search"}]


@pytest.mark.django_db
def test_a_corrupt_export_is_a_400(people, api_as):
    response = api_as(people.admin).generic("POST", "/v1/traces", b"\xff\x00garbage",
                                            content_type="application/x-protobuf")
    assert response.status_code == 400 and response.json()["error"]["code"] == "malformed"
