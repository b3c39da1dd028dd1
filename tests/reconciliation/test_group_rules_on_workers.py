"""Group rules end to end on real workers: reads of one customer's record by three agents,
interleaved at random and sent through two web processes, are one breach, one finding on each
agent involved and one escalation; a group window refills from stored events after Redis lost
it."""

import json
import random
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from reconciliation.models import Escalation, Finding
from registry import actions as registry_actions
from registry.models import Agent
from runtime.actions.group_rules import create_group_rule
from runtime.models import GroupBreach, UncountedBatch
from tests.conftest import approved_agent, eventually, start_daphne, stop_daphne

SPEC = {"data": [{"resource": "customers_db", "access": "read"},
                 {"resource": "payments", "access": "write"}],
        "limits": [], "actions": {"payments.refund": {"max": 50000}}}
NAMES = ("pay-a", "pay-b", "support")


def reads(name: str, count: int, record: str = "c-42") -> list[dict]:
    start = datetime.now(UTC) - timedelta(minutes=30)
    return [{"id": uuid.uuid4().hex, "agent": name,
             "ts": (start + timedelta(seconds=i)).isoformat(), "kind": "data_access",
             "resource": "customers_db", "record": record} for i in range(count)]


def post(base: str, key: str, events: list[dict]) -> dict:
    request = urllib.request.Request(
        f"{base}/api/v1/events", data=json.dumps(events).encode(), method="POST",
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def fleet(people) -> list[Agent]:
    agents = [approved_agent(people, name, **SPEC) for name in NAMES]
    Agent.objects.filter(name="support").update(labels={"team": "support"})
    create_group_rule(actor=people.dana, name="one-customer", measure="events", limit=50,
                      per="1h", per_record=True,
                      match={"kind": "data_access", "resource": "customers_db"})
    return agents


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", [7, 2026])
def test_reads_of_one_record_across_agents_and_web_processes_are_one_breach(
        people, start_worker, seed):
    agents = fleet(people)
    _, key = registry_actions.issue_api_token(people.admin, actor=people.admin)
    events = reads("pay-a", 25) + reads("pay-b", 25) + reads("support", 20)
    events += reads("pay-a", 40, record="c-7")  # another customer: 40, under the limit
    random.Random(seed).shuffle(events)
    webs = [start_daphne(), start_daphne()]
    workers = [start_worker("ingest", "default") for _ in range(2)]
    try:
        at = 0
        rng = random.Random(seed + 1)
        while at < len(events):
            size = rng.randint(1, 12)
            body = post(webs[rng.randint(0, 1)].url, key, events[at:at + size])
            assert body["accepted"] == len(events[at:at + size]), body
            at += size
        try:
            eventually(lambda: Finding.objects.filter(kind="group_limit_exceeded").count() == 3,
                       timeout=120)
        except AssertionError:
            raise AssertionError(workers[0].output() + workers[1].output() + str(
                list(GroupBreach.objects.values()))) from None
    finally:
        for web in webs:
            stop_daphne(web)
    eventually(lambda: Escalation.objects.filter(
        finding__kind="group_limit_exceeded").count() == 1, timeout=60)
    (breach,) = GroupBreach.objects.all()
    assert breach.group_key == "record:customers_db:c-42"
    assert breach.agents == ["pay-a", "pay-b", "support"]
    # The window's count as of each event's own time: over 50, at most the 70 sent.
    assert 50 < breach.total <= 70
    findings = Finding.objects.filter(kind="group_limit_exceeded")
    assert sorted(f.agent.name for f in findings) == sorted(NAMES)
    assert {f.pointer for f in findings} == {"/group-rules/one-customer"}
    assert breach.escalation.finding in findings
    # Every other involved agent's finding points at the one escalation.
    for finding in findings.exclude(pk=breach.escalation.finding_id):
        assert finding.status == "logged"
        assert f"escalation #{breach.escalation_id}" in finding.reason
    assert not Finding.objects.exclude(kind="group_limit_exceeded").exists()
    assert {a.name for a in agents} == set(NAMES)
    # Each batch's outbox row went once the breach jobs it queued had run.
    eventually(lambda: not UncountedBatch.objects.exists(), timeout=60)


@pytest.mark.timeout(300)
def test_a_group_window_lost_with_redis_is_refilled_from_stored_events(
        people, start_worker, redis_client, api_as):
    fleet(people)
    worker = start_worker("ingest", "default")
    admin = api_as(people.admin)
    assert admin.post("/api/v1/events", reads("pay-a", 30),
                      format="json").json()["accepted"] == 30
    assert any(k.startswith(b"gw:") for k in redis_client.keys())
    redis_client.flushdb()  # Redis restarted empty: the window and its marker are gone
    assert admin.post("/api/v1/events", reads("support", 21),
                      format="json").json()["accepted"] == 21
    (finding_a, finding_s) = eventually(
        lambda: list(Finding.objects.filter(kind="group_limit_exceeded")
                     .order_by("agent__name")) if Finding.objects.filter(
            kind="group_limit_exceeded").count() == 2 else None,
        timeout=120, message=worker.output())
    assert (finding_a.agent.name, finding_s.agent.name) == ("pay-a", "support")
    assert GroupBreach.objects.get().total == 51
    assert Escalation.objects.count() == 1
