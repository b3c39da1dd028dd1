"""runtime's data reaches the loop by registration from its AppConfig.ready, not by the loop
importing runtime: its behaviour events are under retention, and a platform's report of an
agent the registry does not know is kept as a shadow agent; with nobody keeping them, the
report is refused, never dropped."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from reconciliation import actions, retention
from reconciliation.actions import observations
from runtime.models import UnregisteredAgent
from runtime.retention import EVENTS


def test_behaviour_events_are_kept_as_long_as_the_rules_need():
    assert EVENTS in retention.kinds()
    assert retention.keep(EVENTS).days >= 30


@pytest.mark.django_db
def test_a_report_of_an_unknown_agent_is_kept_as_a_shadow_agent():
    shadow, row, changed = actions.note_unregistered_observation(
        "stray-agent", {"tools": ["crm.search"]}, actor="system:test")
    assert changed and row.unregistered_id == shadow.pk
    assert UnregisteredAgent.objects.get(name="stray-agent").last_observation == {
        "tools": ["crm.search"]}


@pytest.mark.django_db
def test_with_nobody_keeping_unknown_agents_a_report_is_refused(monkeypatch):
    monkeypatch.setattr(observations, "_unregistered_keeper", [])
    with pytest.raises(ImproperlyConfigured):
        actions.note_unregistered_observation("stray-agent", {"tools": []},
                                              actor="system:test")
    assert not UnregisteredAgent.objects.exists()


def test_runtime_decides_the_escalations_of_its_decisions():
    from reconciliation.actions import escalations
    from runtime.actions.decisions import answer_pending, too_late

    assert escalations._decisions("answer_pending") is answer_pending
    assert escalations._decisions("too_late") is too_late


def test_with_nobody_deciding_a_decision_escalation_is_an_error(monkeypatch):
    from reconciliation.actions import escalations

    monkeypatch.setattr(escalations, "_decision_actions", {})
    with pytest.raises(ImproperlyConfigured):
        escalations._decisions("answer_pending")
