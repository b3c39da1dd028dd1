"""Silence: an agent unheard for longer than its heartbeat turns Ready=Unknown (Silent) with
one alert, and clears, audited, when it reports again; agents seen only in traffic count."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from reconciliation.actions import record_observation
from reconciliation.models import AgentStatus, AlertEvent, Silence
from reconciliation.silence import find_silent_agents, heard, heartbeat_seconds, is_silent
from runtime.actions import request_decision
from runtime.actions.behaviour import ingest_events
from runtime.models import BehaviourEvent, Decision
from tests.conftest import approved_agent

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def ready(agent):
    status = AgentStatus.objects.get(agent=agent)
    return {k: status.condition("Ready")[k] for k in ("status", "reason")}


def event(agent, **fields):
    return {"id": uuid.uuid4().hex, "agent": agent, "ts": timezone.now().isoformat(),
            "kind": "data_access", "resource": "orders_db", "record": "order-1", **fields}


def test_is_silent_and_heartbeats_by_spec_then_connector(settings):
    assert not is_silent(T0, 60, T0 - timedelta(seconds=60))
    assert is_silent(T0, 60, T0 - timedelta(seconds=61))
    assert not is_silent(T0, 60, None)  # never seen: not started, not silent
    assert not is_silent(T0, 0, T0 - timedelta(days=9))  # heartbeat off
    settings.HEARTBEAT_PUSH_SECONDS, settings.HEARTBEAT_HTTP_SECONDS = 300, 120
    settings.HEARTBEAT_SANDBOX_SECONDS = 0
    assert heartbeat_seconds({}, {"type": "push"}) == 300
    assert heartbeat_seconds({}, {"type": "http"}) == 120
    assert heartbeat_seconds({}, {"type": "sandbox"}) == 0
    assert heartbeat_seconds({"heartbeat": "2m"}, {"type": "sandbox"}) == 120


def test_a_push_agent_goes_silent_once_and_clears_when_it_reports(people, settings):
    agent = approved_agent(people, "reporter", connector={"type": "push"})
    record_observation(agent, {"tools": []}, actor="agent:reporter", source="push",
                       trigger_reconcile=False)
    now = timezone.now()
    assert find_silent_agents(now + timedelta(seconds=299)) == {"started": 0, "ended": 0,
                                                                 "silent": 0}
    assert find_silent_agents(now + timedelta(seconds=302)) == {"started": 1, "ended": 0,
                                                                 "silent": 1}
    assert ready(agent) == {"status": "Unknown", "reason": "Silent"}
    assert find_silent_agents(now + timedelta(seconds=900))["started"] == 0  # one alert only
    assert AlertEvent.objects.filter(event="agent.silent", agent_name="reporter").count() == 1
    entry = AuditEntry.objects.get(action="agent.silent")
    assert entry.agent == "reporter" and entry.after["expected_seconds"] == 300
    record_observation(agent, {"tools": []}, actor="agent:reporter", source="push",
                       trigger_reconcile=False)  # a heartbeat: the same state again
    silence = Silence.objects.get(agent=agent)
    assert silence.ended_at is not None
    assert ready(agent)["reason"] != "Silent" and ready(agent)["status"] != "Unknown"
    assert AlertEvent.objects.filter(event="agent.heard_again", agent_name="reporter").exists()
    assert AuditEntry.objects.filter(action="agent.heard_again", agent="reporter").count() == 1


def test_a_spec_heartbeat_overrides_and_sandbox_agents_are_not_watched_by_default(people):
    quick = approved_agent(people, "quick", heartbeat="30s")  # a sandbox agent with a heartbeat
    approved_agent(people, "simulated")  # sandbox, no heartbeat: the default is off
    record_observation(quick, {"tools": []}, actor="system", source="sandbox",
                       trigger_reconcile=False)
    later = timezone.now() + timedelta(seconds=31)
    assert find_silent_agents(later)["started"] == 1
    assert list(Silence.objects.values_list("agent_name", "expected_seconds")) == [("quick", 30)]


def test_events_and_decisions_are_signs_of_life_and_real_silence_is_still_found(
        people, settings):
    chatty = approved_agent(people, "chatty", connector={"type": "push"})
    asker = approved_agent(people, "asker", connector={"type": "push"})
    record_observation(chatty, {"tools": []}, actor="agent:chatty", source="push",
                       trigger_reconcile=False)
    ingest_events([event("ghost-agent")], actor=people.alice)  # nobody registered it
    expected = timedelta(seconds=settings.HEARTBEAT_PUSH_SECONDS)
    later = timezone.now() + expected * 2
    # chatty's report is old but it keeps sending events; asker asks for decisions
    ingest_events([event("chatty")], actor=people.alice)
    request_decision(asker, {"action": "orders.lookup"}, actor=people.alice)
    # as if both came in 3 s before the check
    BehaviourEvent.objects.filter(agent=chatty).update(received_at=later - timedelta(seconds=3))
    Decision.objects.filter(agent=asker).update(created_at=later - timedelta(seconds=3))
    assert find_silent_agents(later) == {"started": 1, "ended": 0, "silent": 1}
    (silence,) = Silence.objects.all()
    assert silence.agent_name == "ghost-agent" and silence.agent is None
    assert not Silence.objects.filter(agent_name__in=["chatty", "asker"]).exists()
    assert heard(chatty).line(later) == (
        f"last event 3 s ago; no observed-state report for {expected.seconds * 2 // 60} min")
    assert heard(asker).line(later) == "last decision asked 3 s ago; no observed-state report yet"
    # nothing at all from either for longer than the heartbeat: both are silent
    quiet = later + expected + timedelta(seconds=1)
    assert find_silent_agents(quiet)["started"] == 2
    assert ready(chatty) == {"status": "Unknown", "reason": "Silent"}
    assert Silence.objects.get(agent=chatty, ended_at__isnull=True).last_heard_at == (
        later - timedelta(seconds=3))
    # an event ends chatty's silence at the next check, audited with what was heard
    ingest_events([event("chatty")], actor=people.alice)
    BehaviourEvent.objects.filter(agent=chatty, received_at__lt=later - timedelta(seconds=3)
                                  ).update(received_at=quiet + timedelta(seconds=1))
    assert find_silent_agents(quiet + timedelta(seconds=2))["ended"] == 1
    assert Silence.objects.get(agent=chatty).ended_at is not None
    assert AuditEntry.objects.get(action="agent.heard_again", agent="chatty").reason == (
        "sent events again")


def test_a_retired_or_suspended_agent_is_no_longer_watched(people):
    agent = approved_agent(people, "reporter", connector={"type": "push"})
    record_observation(agent, {"tools": []}, actor="agent:reporter", source="push",
                       trigger_reconcile=False)
    later = timezone.now() + timedelta(seconds=400)
    find_silent_agents(later)
    type(agent).objects.filter(pk=agent.pk).update(lifecycle="suspended")
    assert find_silent_agents(later)["ended"] == 1
    assert AuditEntry.objects.get(action="agent.heard_again").reason.startswith("no longer")
