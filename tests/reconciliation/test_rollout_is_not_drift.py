"""An approved generation being applied is a rollout (Argo CD's Syncing → Synced), not drift:
its findings carry a rollout cause, are announced as a rollout, and stay out of the overview's
drift counts and time to detect, while an outside change in the same pass is still drift."""

from datetime import timedelta

import pytest
from django.utils import timezone

from reconciliation import actions
from reconciliation.dashboard import drift_over_time, response_times
from reconciliation.models import AlertEvent, Finding
from registry import actions as registry_actions
from registry.choices import VersionSource
from registry.models import Agent
from sandbox import actions as sandbox_actions
from tests.conftest import refund_manifest

pytestmark = pytest.mark.django_db

TOOLS = ["orders.lookup", "payments.refund"]


def _approve(people, **spec):
    spec.setdefault("enforcement", {"default": "correct"})
    (outcome,) = registry_actions.apply_manifests(
        [refund_manifest(**spec)], actor=people.alice, source=VersionSource.YAML)
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    return Agent.objects.get(name="refund-agent")


def _pass(agent, trigger="approved"):
    return actions.reconcile_agent(agent.pk, trigger=trigger)


def _chart_total(figure) -> float:
    return sum(v or 0 for trace in figure["data"] for v in trace["y"]
               if trace["type"] == "bar")


def test_an_approved_generation_is_rolled_out_not_reported_as_drift(people):
    agent = _approve(people, tools=TOOLS)
    assert _pass(agent).result == "converged"
    # Generation 2 drops payments.refund's tool and adds orders.cancel.
    agent = _approve(people, tools=["orders.lookup", "orders.cancel"])
    assert agent.generation == 2
    run = _pass(agent)
    assert run.result == "corrected"
    findings = list(Finding.objects.filter(agent=agent))
    assert len(findings) == 2
    assert {f.cause["kind"] for f in findings} == {"rollout"}
    assert {(f.cause["from_generation"], f.cause["generation"]) for f in findings} == {(1, 2)}
    assert {f.status for f in findings} == {"corrected"}
    events = set(AlertEvent.objects.filter(agent_name=agent.name)
                 .values_list("event", flat=True))
    assert {"rollout.started", "rollout.synced"} <= events
    assert not events & {"drift.detected", "drift.corrected"}
    now = timezone.now()
    assert _chart_total(drift_over_time(now)) == 0
    assert all(y is None for trace in response_times(now)["data"] for y in trace["y"])
    # Converged at generation 2: the next pass changes nothing.
    assert _pass(agent, "manual").changes == []


def test_an_outside_change_during_a_rollout_is_still_drift(people):
    agent = _approve(people, tools=TOOLS)
    assert _pass(agent).result == "converged"
    agent = _approve(people, tools=[*TOOLS, "orders.cancel"])
    # Before the rollout's pass, someone gives the agent the CRM on the platform.
    sandbox_actions.sandbox_deploy(agent, actor="system:test", reason="hand edit",
                                   changes={"tools": [*TOOLS, "crm.search"]})
    _pass(agent)
    causes = dict(Finding.objects.filter(agent=agent).values_list("pointer", "cause__kind"))
    assert causes["/tools/orders.cancel"] == "rollout"
    assert causes["/tools/crm.search"] != "rollout"
    assert _chart_total(drift_over_time(timezone.now() + timedelta(seconds=1))) == 1


def test_a_new_agent_has_no_rollout_to_explain_its_first_drift(people):
    agent = _approve(people, tools=TOOLS)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", reason="hand edit",
                                   changes={"tools": [*TOOLS, "crm.search"]})
    _pass(agent, "observation")
    assert {f.cause["kind"] for f in Finding.objects.filter(agent=agent)} != {"rollout"}
