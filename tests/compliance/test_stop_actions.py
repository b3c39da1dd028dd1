"""The stop button, through its actions and API: dana (compliance) stops a team, a selector, an
owner or the fleet; every decision of a stopped agent is denied (even one registered into the
scope afterwards, even one a human tries to resume), its pending decisions end as deny, and
lifting it takes two people. Bad input is the documented JSON error with nothing written."""

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from compliance import actions
from compliance.models import Stop
from config.errors import Conflict, NotAllowed
from reconciliation import actions as reconciliation
from reconciliation.actions.common import desired_now
from registry.models import Agent
from runtime import actions as runtime
from tests.compliance.personas import labelled_agent
from tests.conftest import make_person, token_client

pytestmark = pytest.mark.django_db


def ask(people, agent, amount=100):
    return runtime.request_decision(agent, {"action": "payments.refund", "amount": amount},
                                    actor=agent.owner)


@pytest.fixture
def fleet(people):
    """Two payments agents (alice's), one support agent (frank's)."""
    frank = make_person("frank", "owner")
    return {
        "refund": labelled_agent(people, "refund-agent", {"team": "payments", "env": "prod"}),
        "payout": labelled_agent(people, "payout-agent", {"team": "payments", "env": "dev"}),
        "support": labelled_agent(people, "support-agent", {"team": "support", "env": "prod"},
                                  owner=frank),
    }


def lifecycles() -> dict[str, str]:
    return dict(Agent.objects.values_list("name", "lifecycle"))


def test_a_team_stop_denies_its_agents_and_leaves_the_others_alone(people, fleet):
    assert ask(people, fleet["refund"]).outcome == "allow"
    stop = actions.place_stop(actor=people.dana, scope="team", team="payments",
                              reason="refund loop in payments")
    assert lifecycles() == {"refund-agent": "suspended", "payout-agent": "suspended",
                            "support-agent": "active"}
    denied = ask(people, Agent.objects.get(name="refund-agent"))
    assert denied.outcome == "deny" and denied.rule.startswith(f"stop {stop.pk}: team payments")
    assert "refund loop in payments" in denied.rule
    assert ask(people, fleet["support"]).outcome == "allow"
    assert desired_now(Agent.objects.get(name="payout-agent"), timezone.now())[
        "running"] is False
    placed = AuditEntry.objects.get(action="stop.placed")
    assert (placed.actor, placed.reason) == ("dana", "refund loop in payments")
    assert placed.after["suspended"] == ["payout-agent", "refund-agent"]


@pytest.mark.parametrize(("scope", "fields", "stopped"), [
    ("fleet", {}, {"refund-agent", "payout-agent", "support-agent"}),
    ("selector", {"selector": {"env": "prod"}}, {"refund-agent", "support-agent"}),
    ("owner", {"owner": "frank"}, {"support-agent"}),
])
def test_each_scope_reaches_exactly_its_agents(people, fleet, scope, fields, stopped):
    actions.place_stop(actor=people.admin, scope=scope, reason="incident 7", **fields)
    assert {n for n, state in lifecycles().items() if state == "suspended"} == stopped
    for agent in Agent.objects.all():
        expected = "deny" if agent.name in stopped else "allow"
        assert ask(people, agent).outcome == expected, agent.name


def test_lifting_takes_two_people_and_resumes_only_what_the_stop_suspended(people, fleet):
    reconciliation.suspend_agent(fleet["payout"], actor=people.bob, reason="held by bob")
    stop = actions.place_stop(actor=people.dana, scope="team", team="payments", reason="loop")
    assert stop.agents == ["refund-agent"]
    actions.request_lift(stop.pk, actor=people.dana, reason="loop fixed in 2.3.1")
    with pytest.raises(NotAllowed, match="Four eyes"):
        actions.approve_lift(stop.pk, actor=people.dana)
    with pytest.raises(NotAllowed):
        actions.approve_lift(stop.pk, actor=people.bob)  # an approver is not compliance
    assert ask(people, Agent.objects.get(name="refund-agent")).outcome == "deny"
    actions.approve_lift(stop.pk, actor=people.admin)
    assert lifecycles() == {"refund-agent": "active", "payout-agent": "suspended",
                            "support-agent": "active"}
    assert ask(people, Agent.objects.get(name="refund-agent")).outcome == "allow"
    lifted = AuditEntry.objects.get(action="stop.lifted")
    assert lifted.actor == "admin" and lifted.after["lift_requested_by"] == "dana"
    assert lifted.after["resumed"] == ["refund-agent"]
    with pytest.raises(Conflict, match="lifted already"):
        actions.request_lift(stop.pk, actor=people.dana, reason="again")


def test_a_lift_nobody_asked_for_cannot_be_approved(people, fleet):
    stop = actions.place_stop(actor=people.dana, scope="fleet", reason="breach")
    with pytest.raises(Conflict, match="Nobody asked"):
        actions.approve_lift(stop.pk, actor=people.admin)
    assert Stop.objects.get(pk=stop.pk).active


def test_nobody_slips_past_a_stop(people, fleet):
    stop = actions.place_stop(actor=people.dana, scope="team", team="payments", reason="loop")
    # a human resume is refused while the stop stands
    with pytest.raises(Conflict, match="stopped"):
        reconciliation.resume_agent(Agent.objects.get(name="refund-agent"), actor=people.bob,
                                    reason="looks fine")
    # an agent registered into the team afterwards is refused too
    late = labelled_agent(people, "late-agent", {"team": "payments"})
    assert late.lifecycle == "active"
    assert ask(people, late).outcome == "deny"
    assert desired_now(late, timezone.now())["running"] is False
    # the stop's record is the same after all that
    assert Stop.objects.get(pk=stop.pk).active


def test_pending_decisions_end_as_deny_and_cannot_be_allowed(people, fleet):
    pending = ask(people, fleet["refund"], amount=900)
    assert pending.outcome == "pending"
    actions.place_stop(actor=people.dana, scope="owner", owner="alice", reason="alice's keys")
    pending.refresh_from_db()
    assert (pending.status, pending.outcome) == ("rejected", "deny")
    with pytest.raises(Conflict):
        runtime.decide_pending(str(pending.pk), actor=people.carol, allow=True, comment="ok")


def test_only_compliance_or_admin_press_the_button(people, fleet, api_as):
    for who in (people.alice, people.bob):
        with pytest.raises(NotAllowed):
            actions.place_stop(actor=who, scope="fleet", reason="no")
        answer = api_as(who).post("/api/v1/stops", {"scope": "fleet", "reason": "no"},
                                  format="json")
        assert answer.status_code == 403
    agent = token_client(people, fleet["refund"]).post(
        "/api/v1/stops", {"scope": "fleet", "reason": "no"}, format="json")
    assert agent.status_code == 403
    assert not Stop.objects.exists() and lifecycles()["refund-agent"] == "active"


@pytest.mark.parametrize(("body", "pointer"), [
    ({"reason": "x"}, "/scope"),
    ({"scope": "galaxy", "reason": "x"}, "/scope"),
    ({"scope": "fleet"}, "/reason"),
    ({"scope": "fleet", "reason": "  "}, "/reason"),
    ({"scope": "team", "reason": "x"}, "/team"),
    ({"scope": "selector", "reason": "x", "selector": {}}, "/selector"),
    ({"scope": "selector", "reason": "x", "selector": {"env": 3}}, "/selector/env"),
    ({"scope": "owner", "reason": "x", "owner": "nobody"}, "/owner"),
])
def test_bad_input_is_the_documented_error_and_nothing_stops(people, fleet, api_as, body,
                                                             pointer):
    answer = api_as(people.dana).post("/api/v1/stops", body, format="json")
    assert answer.status_code in (400, 422), answer.content
    error = answer.json()["error"]
    assert any(d["pointer"] == pointer for d in error["details"]), error
    assert not Stop.objects.exists()
    assert set(lifecycles().values()) == {"active"}


def test_the_api_stops_and_two_people_lift(people, fleet, api_as):
    dana, admin = api_as(people.dana), api_as(people.admin)
    placed = dana.post("/api/v1/stops", {"scope": "selector", "selector": {"env": "prod"},
                                         "reason": "prod incident"}, format="json")
    assert placed.status_code == 201, placed.content
    stop = placed.json()
    assert stop["reaches"] == "agents labelled env=prod" and stop["stopped_by"] == "dana"
    assert [s["id"] for s in api_as(people.bob).get("/api/v1/stops?active=true").json()] == [
        stop["id"]]
    assert dana.post(f"/api/v1/stops/{stop['id']}/lift/approve").status_code == 409
    asked = dana.post(f"/api/v1/stops/{stop['id']}/lift", {"reason": "resolved"},
                      format="json")
    assert asked.status_code == 200 and asked.json()["lift_requested_by"] == "dana"
    assert dana.post(f"/api/v1/stops/{stop['id']}/lift/approve").status_code == 403
    lifted = admin.post(f"/api/v1/stops/{stop['id']}/lift/approve")
    assert lifted.status_code == 200 and lifted.json()["lifted_by"] == "admin"
    assert set(lifecycles().values()) == {"active"}
    assert dana.post("/api/v1/stops/999999/lift", {"reason": "x"},
                     format="json").status_code == 404
