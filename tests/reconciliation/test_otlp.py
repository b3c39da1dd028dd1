"""OTLP/HTTP: spans exported by the real OpenTelemetry SDK become behaviour events, with only
exporter settings (endpoint and a token header) on the agent's side."""

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from registry import actions as registry_actions
from runtime.events import agent_slug, spans_to_events, validate_event
from runtime.models import BehaviourEvent, UnregisteredAgent


def test_an_sdk_export_becomes_events(shared_server_process, people, refund_agent):
    _, key = registry_actions.issue_agent_token(refund_agent, actor=people.alice)
    exporter = OTLPSpanExporter(endpoint=f"{shared_server_process.url}/v1/traces",
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
    with tracer.start_as_current_span("embed") as span:  # not a GenAI operation: ignored
        span.set_attribute("gen_ai.operation.name", "not-an-operation")
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
        "span_id": "cd" * 8, "operation": "execute_tool", "tool": "crm.search"}]


@pytest.mark.django_db
def test_a_corrupt_export_is_a_400(people, api_as):
    response = api_as(people.admin).generic("POST", "/v1/traces", b"\xff\x00garbage",
                                            content_type="application/x-protobuf")
    assert response.status_code == 400 and response.json()["error"]["code"] == "malformed"


def test_spans_under_a_display_name_are_kept_as_an_unregistered_agent(shared_server_process,
                                                                      people, api_as):
    # A platform exports spans of agents nobody registered, under their display names.
    _, key = registry_actions.issue_api_token(people.admin, actor="system:test")
    exporter = OTLPSpanExporter(endpoint=f"{shared_server_process.url}/v1/traces",
                                headers={"Authorization": f"Token {key}"})
    provider = TracerProvider(resource=Resource.create({"service.name": "tutoring-platform"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tutoring-platform")
    for name, tool in (("Math Tutor", "calculator"), ("Math Tutor", "plotter"),
                       ("数学", "calculator"), ("x" * 300, "calculator")):
        with tracer.start_as_current_span(f"execute_tool {tool}") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", tool)
            span.set_attribute("gen_ai.agent.name", name)
    assert provider.force_flush()
    provider.shutdown()
    assert list(BehaviourEvent.objects.order_by("ts").values_list(
        "agent_name", "agent_id", "tool", "source")) == [
        ("math-tutor", None, "calculator", "otlp"), ("math-tutor", None, "plotter", "otlp")]
    shadow = UnregisteredAgent.objects.get()
    assert (shadow.name, shadow.display_name, shadow.events) == ("math-tutor", "Math Tutor", 2)
    (listed,) = api_as(people.dana).get("/api/v1/unregistered").json()
    assert (listed["name"], listed["display_name"], listed["events"]) == (
        "math-tutor", "Math Tutor", 2)


def test_agent_names_are_made_slugs_and_only_unusable_ones_are_refused():
    assert [agent_slug(name) for name in (
        "refund-agent", "Math Tutor", "support_bot", "Ünïcödé Bot", "  Team/Agent.v2 ",
        "数学", "a" * 64)] == [
        "refund-agent", "math-tutor", "support-bot", "unicode-bot", "team-agent-v2", "", ""]
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    base = {"id": "e1", "ts": now.isoformat(), "kind": "tool_call", "tool": "calculator"}
    event = validate_event({**base, "agent": "Math Tutor"}, now)
    assert (event.agent, event.label) == ("math-tutor", "Math Tutor")
    assert validate_event({**base, "agent": "math-tutor"}, now).label == ""
    assert validate_event({**base, "agent": "数学"}, now) == (
        "agent '数学' has no letters or digits to make an agent name of")
    assert validate_event({**base, "agent": "a" * 64}, now).endswith(
        "makes an agent name longer than 63 characters")
    assert validate_event({**base, "agent": "a" * 257}, now) == (
        "agent must be at most 256 characters")
    assert validate_event({**base, "agent": "   "}, now).startswith("agent must be an agent name")
