"""Fleet effects stay inside their owner (issue 29, item 2). The issue's scenario through the
API: a `block` group rule over the payments team's refunds; alice's agent self-reports one
refund of $1,000,000 while she keeps it out of reach (its own shadow mode, or her own
breaker). Before: oscar's agents, which reported nothing, were denied every decision; alice's
kept running. Now the report counts at most her spec's own `max`; a block that does trip
reaches only the owners whose agents filled the window, her agent included whatever its
shadow or breaker, and it reaches further only when compliance chose so for the rule
(audited)."""

import uuid
from datetime import UTC, datetime

import django_rq
import pytest
from rest_framework.test import APIClient
from rq import SimpleWorker

from audit.models import AuditEntry
from reconciliation.models import BreakerTrip, Finding
from registry import actions as registry_actions
from registry.choices import Role
from registry.models import Agent
from runtime.models import GroupBreach
from tests.conftest import approved_agent, make_person, shadow_on
from tests.reconciliation.test_breaker_scopes import agent_of

pytestmark = pytest.mark.django_db

SPEC = {"data": [{"resource": "payments", "access": "write"}], "limits": [],
        "actions": {"payments.refund": {"max": 5000}},
        "enforcement": {"default": "correct", "behaviour": "log", "actions": "log"}}
RULE = {"name": "payments-refunds", "selector": {"team": "payments"},
        "match": {"action": "payments.refund"}, "measure": "amount", "limit": 20000,
        "per": "1h", "effect": "block"}
ASK = {"action": "payments.refund", "amount": 100}


def refund(agent: str, amount: float) -> dict:
    return {"id": uuid.uuid4().hex, "agent": agent, "ts": datetime.now(UTC).isoformat(),
            "kind": "action", "action": "payments.refund", "amount": amount}


def drain(capture) -> None:
    """What the ingest and default workers would do next: breaches, then blocks (each job's
    own after-commit work included)."""
    for _ in range(3):
        with capture(execute=True):
            for name in ("ingest", "default"):
                queue = django_rq.get_queue(name)
                SimpleWorker([queue], connection=queue.connection).work(burst=True)


def send(client, events: list[dict], capture) -> None:
    with capture(execute=True):
        response = client.post("/api/v1/events", events, format="json")
    assert response.status_code in (200, 202), response.json()
    drain(capture)


def ask(client, agent: str) -> dict:
    response = client.post(f"/api/v1/agents/{agent}/decisions", ASK, format="json")
    assert response.status_code in (200, 201), response.json()
    return response.json()


@pytest.fixture
def team(people, api_as, redis_client):
    """alice's pay-a and pay-b, oscar's oscar-1, all team payments, each with its token; the
    block rule saved by compliance through the API."""
    oscar = make_person("oscar", Role.OWNER)
    approved_agent(people, "pay-a", **SPEC)
    approved_agent(people, "pay-b", **SPEC)
    agent_of(oscar, "oscar-1", people.bob)
    Agent.objects.update(labels={"team": "payments"})
    saved = api_as(people.dana).post("/api/v1/group-rules", RULE, format="json")
    assert saved.status_code == 201, saved.json()
    assert saved.json()["across_owners"] is False
    return {name: own_token(Agent.objects.get(name=name))
            for name in ("pay-a", "pay-b", "oscar-1")}


def own_token(agent: Agent) -> APIClient:
    """A client holding the agent's token, issued by its owner."""
    _, key = registry_actions.issue_agent_token(agent, actor=agent.owner)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_one_self_reported_million_counts_at_most_the_specs_max(
        people, team, django_capture_on_commit_callbacks):
    shadow_on(people, Agent.objects.get(name="pay-a"))
    send(team["pay-a"], [refund("pay-a", 1_000_000)], django_capture_on_commit_callbacks)
    assert not GroupBreach.objects.exists()  # counted as 5,000 of a 20,000 limit
    assert ask(team["oscar-1"], "oscar-1")["outcome"] == "allow"
    assert ask(team["pay-b"], "pay-b")["outcome"] == "allow"
    assert not Agent.objects.filter(lifecycle="suspended").exists()


def test_a_block_stays_inside_the_owner_and_her_shadow_does_not_shield_her(
        people, team, django_capture_on_commit_callbacks):
    shadow_on(people, Agent.objects.get(name="pay-a"))
    send(team["pay-a"], [refund("pay-a", 1_000_000) for _ in range(5)],
         django_capture_on_commit_callbacks)  # 5 x 5,000 = 25,000: over
    (breach,) = GroupBreach.objects.all()
    assert breach.agents == ["pay-a"] and breach.total == 25000
    # her own agent is blocked although in shadow mode, her other agent denied
    assert Finding.objects.get(agent__name="pay-a", kind="group_limit_exceeded").status \
        == "blocked"
    assert Agent.objects.get(name="pay-a").lifecycle == "suspended"
    denied = ask(team["pay-b"], "pay-b")
    assert denied["outcome"] == "deny" and "payments-refunds" in denied["rule"]
    # oscar's agent contributed nothing: it keeps working, untouched
    assert ask(team["oscar-1"], "oscar-1")["outcome"] == "allow"
    assert Agent.objects.get(name="oscar-1").lifecycle == "active"
    assert not Finding.objects.filter(agent__name="oscar-1").exists()


def test_her_own_breaker_does_not_shield_her_either(people, team,
                                                    django_capture_on_commit_callbacks):
    # her breaker tripped (as the loop trips it when her agents drift): it pauses the loop's
    # corrections of her agents, not a fleet block that reaches her
    BreakerTrip.objects.create(scope="owner:alice", tripped_at=datetime.now(UTC),
                               reason="alice's agents drifted")
    send(team["pay-a"], [refund("pay-a", 5000) for _ in range(5)],
         django_capture_on_commit_callbacks)
    assert Agent.objects.get(name="pay-a").lifecycle == "suspended"
    assert ask(team["oscar-1"], "oscar-1")["outcome"] == "allow"


def test_an_owner_who_contributed_is_blocked_with_the_group(people, team,
                                                            django_capture_on_commit_callbacks):
    send(team["oscar-1"], [refund("oscar-1", 1000)], django_capture_on_commit_callbacks)
    send(team["pay-a"], [refund("pay-a", 5000) for _ in range(4)],
         django_capture_on_commit_callbacks)  # 21,000 with oscar's 1,000
    assert ask(team["oscar-1"], "oscar-1")["outcome"] == "deny"


def test_compliance_chooses_a_rule_that_reaches_across_owners_audited(
        people, api_as, client, team, django_capture_on_commit_callbacks):
    dana = api_as(people.dana)
    client.force_login(people.dana)
    page = client.get("/group-rules/payments-refunds/").content.decode()
    assert "blocks only the agents of owners whose agents filled the window" in page
    bad = dana.patch("/api/v1/group-rules/payments-refunds", {"across_owners": "sometimes"},
                     format="json")
    assert bad.status_code in (400, 422)
    not_block = dana.post("/api/v1/group-rules", {**RULE, "name": "counting", "effect": "log",
                                                  "across_owners": True}, format="json")
    assert not_block.status_code == 422
    assert [d["pointer"] for d in not_block.json()["error"]["details"]] == ["/across_owners"]
    assert api_as(people.alice).patch("/api/v1/group-rules/payments-refunds",
                                      {"across_owners": True},
                                      format="json").status_code == 403
    chosen = dana.patch("/api/v1/group-rules/payments-refunds", {"across_owners": True},
                        format="json")
    assert chosen.status_code == 200 and chosen.json()["across_owners"] is True
    page = client.get("/group-rules/payments-refunds/").content.decode()
    assert "blocks every owner's agents in the group (chosen by compliance)" in page
    entry = AuditEntry.objects.filter(action="group_rule.updated").latest("pk")
    assert (entry.before["across_owners"], entry.after["across_owners"]) == (False, True)
    send(team["pay-a"], [refund("pay-a", 5000) for _ in range(5)],
         django_capture_on_commit_callbacks)
    assert ask(team["oscar-1"], "oscar-1")["outcome"] == "deny"
    assert Agent.objects.get(name="oscar-1").lifecycle == "active"  # denied, not suspended


def test_an_action_without_a_max_counts_at_most_the_rules_limit(
        people, team, django_capture_on_commit_callbacks):
    approved_agent(people, "pay-free", **{**SPEC, "actions": {}})
    Agent.objects.filter(name="pay-free").update(labels={"team": "payments"})
    free = own_token(Agent.objects.get(name="pay-free"))
    send(free, [refund("pay-free", 1_000_000)], django_capture_on_commit_callbacks)
    assert not GroupBreach.objects.exists()  # one report alone never trips the block
    assert ask(team["oscar-1"], "oscar-1")["outcome"] == "allow"
