"""Budgets: token and cost usage (from GenAI spans or events) against the spec's per-agent
budgets per hour and per day: a warning at 80%, the spec's behaviour enforcement above 100%.
Pure functions with exact expectations, the manifest's validation, and end to end on a real
worker."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from reconciliation.models import Escalation, Finding
from registry.manifest import ManifestError, canonicalize
from runtime.budgets import budget_checks, budget_violation
from runtime.events import Event
from tests.conftest import approved_with_client, eventually

SPEC = {"budgets": [{"cost": 25, "per": "1d"}, {"tokens": 10000, "per": "1h"}],
        "enforcement": {"default": "correct", "behaviour": "escalate"}}
T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)


def usage(tokens_in=None, tokens_out=None, cost=None) -> Event:
    return Event(id=uuid.uuid4().hex, agent="a", ts=T0, kind="model_call",
                 input_tokens=tokens_in, output_tokens=tokens_out, cost=cost)


def test_an_event_spends_in_each_budget_it_reports_usage_for():
    spec = canonicalize({"framework": "x", "connector": {"type": "push"}, **SPEC})
    assert spec["budgets"] == [{"cost": 25, "per": "1d"}, {"tokens": 10000, "per": "1h"}]
    both = budget_checks(spec, usage(1200, 300, 0.5), 7)
    assert [(c.key, c.value, index) for c, index in both] == [
        ("bb:7:cost:86400", 0.5, 0), ("bb:7:tokens:3600", 1500.0, 1)]
    assert [index for _, index in budget_checks(spec, usage(tokens_out=10), 7)] == [1]
    assert budget_checks(spec, usage(), 7) == []  # no usage reported: nothing spent


def test_80_percent_warns_and_above_100_percent_breaks_the_budget():
    spec = canonicalize({"framework": "x", "connector": {"type": "push"}, **SPEC})
    assert budget_violation(spec, 1, 7999, "e") is None
    warning = budget_violation(spec, 1, 8000, "e")
    assert (warning.kind, warning.pointer, warning.area, warning.expected, warning.actual) == (
        "budget_warning", "/budgets/1/tokens", "warning", 10000, 8000)
    assert warning.rule == ("8,000 tokens of the tokens budget of 10,000 tokens per 1h spent "
                            "(80% or more)")
    assert budget_violation(spec, 1, 10000, "e").kind == "budget_warning"  # at, not above
    broken = budget_violation(spec, 0, 25.01, "e")
    assert (broken.kind, broken.area, broken.window_seconds) == (
        "budget_exceeded", "behaviour", 86400)
    assert broken.rule == "cost budget of $25.00 per 1d spent: $25.01"


def test_budgets_are_validated_with_pointers_and_absent_budgets_keep_the_spec_hash():
    with pytest.raises(ManifestError) as caught:
        canonicalize({"framework": "x", "connector": {"type": "push"}, "budgets": [
            {"tokens": 1.5, "per": "1h"}, {"cost": 1, "per": "2d"},
            {"tokens": 5, "per": "60m"}, {"tokens": 9, "per": "1h"}, {"per": "1h"}]})
    assert [(e.pointer, e.message) for e in caught.value.errors] == [
        ("/budgets/0/tokens", "expected an integer > 0; got 1.5"),
        ("/budgets/1/per", "expected a window between 1m and 1d; got '2d'"),
        ("/budgets/3", "expected one tokens budget per window; got a second one per 1h "
                       "(first at /budgets/2)"),
        ("/budgets/4", "expected exactly one of tokens, cost; got neither")]
    assert "budgets" not in canonicalize({"framework": "x", "connector": {"type": "push"}})


def spend(tokens: int, cost: float = 0) -> dict:
    return {"id": uuid.uuid4().hex, "agent": "refund-agent", "kind": "model_call",
            "ts": (datetime.now(UTC) - timedelta(minutes=5)).isoformat(),
            "model": "gpt-4.1", "input_tokens": tokens, "output_tokens": 0, "cost": cost}


@pytest.mark.timeout(240)
def test_a_token_budget_warns_at_80_percent_then_escalates_above_it(people, start_worker):
    agent, client = approved_with_client(people, **SPEC)
    worker = start_worker("ingest", "default")
    assert client.post("/api/v1/events", [spend(4000), spend(3999)],
                       format="json").json()["accepted"] == 2
    assert client.post("/api/v1/events", [spend(1)], format="json").json()["accepted"] == 1
    warning = eventually(lambda: Finding.objects.filter(kind="budget_warning").first(),
                         timeout=120, message=worker.output())
    eventually(lambda: Finding.objects.get(pk=warning.pk).status == "logged")
    assert (warning.agent, warning.expected, warning.pointer) == (agent, 10000,
                                                                  "/budgets/1/tokens")
    assert not Escalation.objects.exists()  # a warning enforces nothing
    assert client.post("/api/v1/events", [spend(2001), spend(50)],
                       format="json").json()["accepted"] == 2
    broken = eventually(lambda: Finding.objects.filter(kind="budget_exceeded").first(),
                        timeout=120, message=worker.output())
    eventually(lambda: Escalation.objects.filter(finding=broken).exists(), timeout=60)
    assert Finding.objects.filter(kind="budget_exceeded").count() == 1  # one per window
    assert Finding.objects.filter(kind="budget_warning").count() == 1
    eventually(lambda: Finding.objects.get(pk=broken.pk).actual == 10051)
