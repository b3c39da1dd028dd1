"""What runtime hands the apps below it, registered from RuntimeConfig.ready (they never import
runtime): the loop's retention, unregistered reports, decision escalations, fleet rows and
signs of life; the registry's group-rule judge and its agent_registered signal; and its
metrics (the event outbox)."""

from typing import Any

from prometheus_client import REGISTRY

from reconciliation import fleet, retention, silence
from reconciliation.actions import escalations, observations
from registry import proposal_gates, signals
from runtime import signs_of_life
from runtime.actions.behaviour import adopt_unregistered
from runtime.actions.decisions import answer_pending, too_late
from runtime.actions.unregistered import note_unregistered_observation
from runtime.fleet_rows import budget_rows, group_rule_rows
from runtime.metrics import EventOutboxCollector
from runtime.proposal_judge import GROUP_RULES
from runtime.retention import EVENTS


def register() -> None:
    """Once per process (each registration ignores a repeat)."""
    # What the loop does with runtime's data, registered rather than imported by it.
    retention.register(EVENTS)  # behaviour events are kept as long as the rules need
    observations.keep_unregistered_with(note_unregistered_observation)
    escalations.decide_decisions_with(answer_pending=answer_pending, too_late=too_late)
    fleet.register_rows(group_rule_rows)  # the fleet view's rows for group rules and budgets
    fleet.register_rows(budget_rows)
    silence.hear_from("event", signs_of_life.last_event)  # alive while sending events
    silence.hear_from("decision", signs_of_life.last_decision)
    silence.watch_shadows(signs_of_life.shadows)
    # What the registry asks of runtime, without importing it.
    proposal_gates.register_judge(GROUP_RULES)  # the group rules a relabel joins or leaves
    signals.agent_registered.connect(_adopt, dispatch_uid="runtime.adopt_unregistered")
    if not any(isinstance(c, EventOutboxCollector) for c in list(REGISTRY._collector_to_names)):
        REGISTRY.register(EventOutboxCollector())  # served at /metrics (config/observability.py)


def _adopt(sender: object, agent: Any, actor: Any, **kwargs: Any) -> None:
    """A registered agent's earlier events, sent while unregistered, become its own."""
    adopt_unregistered(agent, actor=actor)
