"""OpenTelemetry GenAI, fully: spans the real SDK exports for an agent invocation, a model
call with token usage and cost, a tool call and a failed call become events with the agent,
the models, the tokens, the cost and the error, keeping attributes nothing maps; tokens feed
the rule windows, so a limit on tokens per hour works like one on calls."""

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from reconciliation.models import Escalation, Finding
from registry import actions as registry_actions
from runtime.actions.group_rules import create_group_rule
from runtime.events import spans_to_events, validate_event
from runtime.models import BehaviourEvent, GroupBreach
from tests.conftest import eventually

FIELDS = ("kind", "operation", "tool", "model", "input_tokens", "output_tokens", "cost",
          "error", "attributes")


def exporter_for(shared_server_process, key: str) -> tuple[TracerProvider, object]:
    exporter = OTLPSpanExporter(endpoint=f"{shared_server_process.url}/v1/traces",
                                headers={"Authorization": f"Token {key}"})
    provider = TracerProvider(resource=Resource.create({"service.name": "refund-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, provider.get_tracer("refund-agent")


def chat(tracer, tokens_in: int, tokens_out: int, **extra) -> None:
    with tracer.start_as_current_span("chat gpt-4.1") as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.request.model", "gpt-4.1")
        span.set_attribute("gen_ai.response.model", "gpt-4.1-2025-04-14")
        span.set_attribute("gen_ai.usage.input_tokens", tokens_in)
        span.set_attribute("gen_ai.usage.output_tokens", tokens_out)
        for key, value in extra.items():
            span.set_attribute(key, value)


def test_agent_model_tool_and_error_spans_become_events_with_usage(shared_server_process,
                                                                   people, refund_agent):
    _, key = registry_actions.issue_agent_token(refund_agent, actor=people.alice)
    provider, tracer = exporter_for(shared_server_process, key)
    with tracer.start_as_current_span("invoke_agent refund-agent") as span:
        span.set_attribute("gen_ai.operation.name", "invoke_agent")
        span.set_attribute("gen_ai.agent.name", "refund-agent")
        span.set_attribute("gen_ai.agent.id", "asst_42")
        chat(tracer, 1200, 300, **{"gen_ai.usage.cost": 0.0195,
                                   "gen_ai.provider.name": "openai"})
        with tracer.start_as_current_span("execute_tool orders.lookup") as tool:
            tool.set_attribute("gen_ai.operation.name", "execute_tool")
            tool.set_attribute("gen_ai.tool.name", "orders.lookup")
            tool.set_attribute("gen_ai.tool.call.id", "call_1")
        with tracer.start_as_current_span("chat gpt-4.1") as failed:
            failed.set_attribute("gen_ai.operation.name", "chat")
            failed.set_attribute("gen_ai.request.model", "gpt-4.1")
            failed.set_status(Status(StatusCode.ERROR, "rate limited"))
    assert provider.force_flush()
    provider.shutdown()
    rows = {row["kind"] + ("!" if row["error"] else ""): row for row in
            BehaviourEvent.objects.values(*FIELDS)}
    assert rows["agent_invocation"] == {
        "kind": "agent_invocation", "operation": "invoke_agent", "tool": "", "model": "",
        "input_tokens": None, "output_tokens": None, "cost": None, "error": "",
        "attributes": None}  # agent name and id mapped; the id is the fallback name
    assert rows["model_call"] == {
        "kind": "model_call", "operation": "chat", "tool": "", "model": "gpt-4.1-2025-04-14",
        "input_tokens": 1200, "output_tokens": 300, "cost": 0.0195, "error": "",
        "attributes": {"gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4.1"}}
    assert rows["tool_call"]["tool"] == "orders.lookup"
    assert rows["tool_call"]["attributes"] == {"gen_ai.tool.call.id": "call_1"}
    assert (rows["model_call!"]["error"], rows["model_call!"]["model"]) == (
        "rate limited", "gpt-4.1")
    assert BehaviourEvent.objects.count() == 4
    assert set(BehaviourEvent.objects.values_list("agent_name", flat=True)) == {"refund-agent"}


def test_error_type_and_bad_usage_values_by_the_conventions():
    def span(*attributes, status=None):
        body = {"traceId": "ab" * 16, "spanId": "cd" * 8,
                "startTimeUnixNano": "1767225600000000000",
                "attributes": [{"key": k, "value": v} for k, v in attributes]}
        if status:
            body["status"] = status
        return {"resourceSpans": [{"scopeSpans": [{"spans": [body]}]}]}

    (event,) = spans_to_events(span(
        ("gen_ai.operation.name", {"stringValue": "chat"}),
        ("gen_ai.agent.id", {"stringValue": "bot"}),
        ("gen_ai.usage.input_tokens", {"intValue": "77"}),
        ("error.type", {"stringValue": "timeout"}),
        ("weird", {"doubleValue": float("nan")}),
        status={"code": "STATUS_CODE_ERROR", "message": "ignored: error.type wins"}))
    assert (event["kind"], event["agent"], event["input_tokens"], event["error"]) == (
        "model_call", "bot", 77, "timeout")
    assert "attributes" not in event  # a NaN is dropped, not stored
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    assert validate_event({**event, "input_tokens": -1}, now) == (
        "input_tokens must be an integer between 0 and 1e12")
    assert validate_event({**event, "cost": "cheap"}, now) == (
        "cost must be a number between 0 and 1e12")
    assert validate_event({**event, "attributes": {"k": {"nested": 1}}}, now).startswith(
        "attributes values must be")
    assert validate_event(event, now).input_tokens == 77


@pytest.mark.timeout(240)
def test_a_token_limit_per_hour_across_agents_works_like_a_call_limit(
        shared_server_process, people, refund_agent, start_worker):
    create_group_rule(actor=people.dana, name="payments-tokens", measure="tokens",
                      limit=10000, per="1h", selector={"team": "payments"},
                      match={"kind": "model_call"})
    worker = start_worker("ingest", "default")
    _, key = registry_actions.issue_agent_token(refund_agent, actor=people.alice)
    provider, tracer = exporter_for(shared_server_process, key)
    for _ in range(4):
        chat(tracer, 2000, 500)  # 2,500 tokens each: 10,000 is the limit, not above it
    assert provider.force_flush()
    assert BehaviourEvent.objects.filter(kind="model_call").count() == 4
    # 80% of the group's budget: a warning on the agent, nothing enforced.
    warning = eventually(lambda: Finding.objects.filter(kind="group_budget_warning").first(),
                         timeout=120, message=worker.output())
    assert warning.agent == refund_agent
    assert not GroupBreach.objects.filter(group_key="all").exists()
    chat(tracer, 1, 0)
    assert provider.force_flush()
    provider.shutdown()
    breach = eventually(lambda: GroupBreach.objects.filter(group_key="all").first(),
                        timeout=120, message=worker.output())
    assert breach.total == 10001
    finding = eventually(lambda: Finding.objects.filter(kind="group_limit_exceeded").first())
    assert finding.agent == refund_agent
    eventually(lambda: Escalation.objects.filter(finding=finding).exists())
    assert Escalation.objects.count() == 1  # the warning escalated nothing
    assert Finding.objects.filter(kind="group_budget_warning").count() == 1
