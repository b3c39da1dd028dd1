"""Whose events count: an event id is the sending agent's own (another agent using the same id
hides nothing), and what others sent under a name before it was registered is kept, flagged
and never counted toward the agent's rules (nobody can pre-load its windows)."""

import uuid
from datetime import UTC, datetime, timedelta

import django_rq
import pytest
from rq import SimpleWorker

from audit.models import AuditEntry
from reconciliation.models import Finding
from registry import actions as registry_actions
from registry.choices import Lifecycle, Role
from registry.models import Agent
from runtime.models import BehaviourEvent
from tests.conftest import approved_agent, make_person, refund_manifest, token_client

pytestmark = pytest.mark.django_db

GUARDED = {"data": [{"resource": "customers_db", "access": "read"}],
           "limits": [{"resource": "customers_db", "max_same_record": 3, "per": "1h"}],
           "enforcement": {"default": "correct", "behaviour": "block"}}


def read(agent: str, record: str = "c-1", minutes_ago: int = 5, event_id: str = "") -> dict:
    return {"id": event_id or uuid.uuid4().hex, "agent": agent, "kind": "data_access",
            "resource": "customers_db", "record": record,
            "ts": (datetime.now(UTC) - timedelta(minutes=minutes_ago)).isoformat()}


def run_ingest_worker() -> None:
    queue = django_rq.get_queue("ingest")
    SimpleWorker([queue], connection=queue.connection).work(burst=True)


def send(client, events, capture) -> dict:
    with capture(execute=True):
        response = client.post("/api/v1/events", events, format="json")
    assert response.status_code == 200, response.content
    run_ingest_worker()
    return response.json()


def register(people, name: str, **spec) -> Agent:
    """alice registers `name` (a GUARDED agent unless told) and bob approves it."""
    manifest = refund_manifest(**(spec or GUARDED))
    object.__setattr__(manifest, "name", name)
    (outcome,) = registry_actions.apply_manifests([manifest], actor=people.alice,
                                                  source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    return Agent.objects.get(name=name)


def test_an_id_another_agent_used_first_does_not_hide_a_violation(
        people, redis_client, django_capture_on_commit_callbacks):
    sender = token_client(people, approved_agent(people, "billing-agent", **GUARDED))
    refund = approved_agent(people, "refund-agent", **GUARDED)
    # billing-agent's events take the ids refund-agent will use (by chance or on purpose).
    ids = [f"evt-{n}" for n in range(4)]
    taken = send(sender, [read("billing-agent", f"b-{n}", event_id=i)
                          for n, i in enumerate(ids)], django_capture_on_commit_callbacks)
    assert taken["accepted"] == 4

    body = send(token_client(people, refund), [read("refund-agent", event_id=i) for i in ids],
                django_capture_on_commit_callbacks)
    assert (body["accepted"], body["duplicates"]) == (4, 0)
    (finding,) = Finding.objects.filter(agent=refund)
    assert (finding.kind, finding.actual, finding.status) == ("same_record_exceeded", 4,
                                                               "blocked")
    refund.refresh_from_db()
    assert refund.lifecycle == Lifecycle.SUSPENDED
    # A retry is still a repeat, for each agent on its own.
    again = send(token_client(people, refund), [read("refund-agent", event_id=ids[0])],
                 django_capture_on_commit_callbacks)
    assert again["duplicates"] == 1
    assert BehaviourEvent.objects.filter(event_id="evt-0").count() == 2


def test_a_platform_batch_may_carry_one_id_for_two_agents(
        people, api_as, redis_client, django_capture_on_commit_callbacks):
    approved_agent(people, "billing-agent", **GUARDED)
    refund = approved_agent(people, "refund-agent", **GUARDED)
    batch = [read("billing-agent", event_id="span-1"), read("refund-agent", event_id="span-1")]
    body = send(api_as(people.admin), batch, django_capture_on_commit_callbacks)
    assert (body["accepted"], body["duplicates"]) == (2, 0)
    assert BehaviourEvent.objects.get(agent=refund, event_id="span-1").sender.startswith(
        "admin (token:")


def test_another_owner_cannot_preload_an_agents_windows_before_it_is_registered(
        people, api_as, redis_client, django_capture_on_commit_callbacks):
    mallory = api_as(make_person("mallory", Role.OWNER))
    preload = [read("victim-bot", minutes_ago=30 - n) for n in range(5)]
    assert send(mallory, preload, django_capture_on_commit_callbacks)["accepted"] == 5

    victim = register(people, "victim-bot")
    own = token_client(people, victim)
    body = send(own, [read("victim-bot")], django_capture_on_commit_callbacks)  # its first call
    assert body["accepted"] == 1
    victim.refresh_from_db()
    assert victim.lifecycle != Lifecycle.SUSPENDED
    assert not Finding.objects.filter(agent=victim).exists()
    assert redis_client.zcard(f"bw:{victim.pk}:customers_db:record:c-1:3600") == 1

    # Mallory's events are kept, with who sent them, and flagged.
    stored = BehaviourEvent.objects.filter(agent=victim, foreign=True)
    assert stored.count() == 5
    assert {row.sender.split(" ")[0] for row in stored} == {"mallory"}
    assert AuditEntry.objects.get(action="unregistered.adopted").after == {
        "events": 0, "foreign_events": 5, "observations": 0, "foreign_observations": 0}

    # Its own traffic still counts: three more reads of c-1 break its limit of 3.
    send(own, [read("victim-bot", minutes_ago=4 - n) for n in range(3)],
         django_capture_on_commit_callbacks)
    (finding,) = Finding.objects.filter(agent=victim)
    assert (finding.kind, finding.actual) == ("same_record_exceeded", 4)


def test_ids_sent_by_another_owner_before_registration_do_not_make_the_agents_own_repeats(
        people, api_as, redis_client, django_capture_on_commit_callbacks):
    mallory = api_as(make_person("mallory", Role.OWNER))
    ids = [f"evt-{n}" for n in range(4)]
    send(mallory, [read("victim-bot", f"m-{n}", event_id=i) for n, i in enumerate(ids)],
         django_capture_on_commit_callbacks)
    victim = register(people, "victim-bot")
    body = send(token_client(people, victim), [read("victim-bot", event_id=i) for i in ids],
                django_capture_on_commit_callbacks)
    assert (body["accepted"], body["duplicates"]) == (4, 0)
    (finding,) = Finding.objects.filter(agent=victim)
    assert (finding.kind, finding.actual) == ("same_record_exceeded", 4)


def test_the_owners_own_events_from_before_registration_still_count(
        people, api_as, redis_client, django_capture_on_commit_callbacks):
    alice = api_as(people.alice)
    send(alice, [read("new-bot", minutes_ago=30 - n) for n in range(3)],
         django_capture_on_commit_callbacks)
    agent = register(people, "new-bot")
    send(token_client(people, agent), [read("new-bot")], django_capture_on_commit_callbacks)
    (finding,) = Finding.objects.filter(agent=agent)
    assert (finding.kind, finding.actual) == ("same_record_exceeded", 4)
    assert not BehaviourEvent.objects.filter(foreign=True).exists()


def test_another_owners_report_of_an_unregistered_name_does_not_become_the_agents_state(
        people, api_as, redis_client):
    from reconciliation import actions

    owner_report = {"running": True, "tools": ["orders.lookup"], "framework": "langgraph"}
    assert api_as(people.alice).put("/api/v1/agents/victim-bot/observed-state", owner_report,
                                    format="json").status_code == 202
    # Mallory's report comes last: adopted, it would be the push agent's actual state.
    mallory = api_as(make_person("mallory", Role.OWNER))
    hostile = {"running": True, "tools": ["shell.exec"], "framework": "langgraph"}
    assert mallory.put("/api/v1/agents/victim-bot/observed-state", hostile,
                       format="json").status_code == 202

    victim = register(people, "victim-bot", connector={"type": "push"},
                      tools=["orders.lookup"])
    assert [row.state for row in victim.observations.all()] == [owner_report]
    assert AuditEntry.objects.get(action="unregistered.adopted").after == {
        "events": 0, "foreign_events": 0, "observations": 1, "foreign_observations": 1}
    actions.reconcile_agent(victim.pk, trigger="manual")  # its first pass
    assert not Finding.objects.filter(agent=victim, pointer__startswith="/tools").exists()
