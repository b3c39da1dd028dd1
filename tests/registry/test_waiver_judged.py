"""A waiver is judged like the spec change it stands for (issue 29 item 3).

An approver refused with `step_up_required` on a proposal adding a tool granted a 30-day
waiver on the same tool, alone, and the agent ran it uncorrected; the pointer could be a whole
area (/tools, /data, /running). Now a waiver on /tools/X is judged as the proposal adding X:
the same guardrails (a denial refuses it), the same step-up, and as many distinct approvers
(a waiver the change would need two for is pending until a second approver signs it)."""

import pytest
from django.test import Client

from audit.models import AuditEntry
from registry import actions
from registry.actions.waivers import active_waivers
from registry.models import Agent, Waiver
from tests.conftest import approved_agent, refund_manifest
from tests.registry.test_stepup import enrol, lock_passed, next_code, totp

pytestmark = pytest.mark.django_db

WAIVER = {"pointer": "/tools/crm.search", "reason": "CRM lookups during the migration",
          "ticket": "CHG-1234", "duration": "30d"}


def guardrail(client, **fields) -> None:
    body = {"name": "crm-needs-two", "selector": {}, "message": "CRM access needs two",
            "expression": "!('crm.search' in spec.tools)", "effect": "require_approvals",
            "required_approvals": 2, **fields}
    answer = client.post("/api/v1/guardrails", body, format="json")
    assert answer.status_code == 201, answer.json()


def in_force(name: str = "refund-agent") -> list[str]:
    from django.utils import timezone

    return [w.pointer for w in active_waivers(Agent.objects.get(name=name), timezone.now())]


@pytest.mark.parametrize("pointer", ["/tools", "/data", "/running", "/actions", "/limits",
                                     "/mcp_servers", "/grants", "/running/x", "/nonsense/x",
                                     "/TOOLS/crm.search", "tools/crm.search", ""])
def test_a_whole_area_or_unknown_pointer_is_refused(api_as, people, pointer):
    approved_agent(people, "refund-agent")
    answer = api_as(people.dana).post("/api/v1/agents/refund-agent/waivers",
                                      {**WAIVER, "pointer": pointer}, format="json")
    assert answer.status_code in (400, 422), answer.json()
    assert answer.json()["error"]["details"][0]["pointer"] == "/pointer"
    assert not Waiver.objects.exists()


def test_a_step_up_change_needs_step_up_for_its_waiver(api_as, people, settings):
    agent = approved_agent(people, "refund-agent")
    settings.STEPUP_RISK_THRESHOLD = 5  # adding a tool scores 10
    bob = api_as(people.bob)
    proposal = actions.propose(agent, refund_manifest(
        tools=["orders.lookup", "payments.refund", "crm.search"]).spec,
        agent.active_version.metadata, actor=people.alice, source="api").version
    refused = bob.post(f"/api/v1/proposals/{proposal.pk}/approve", {}, format="json")
    assert refused.json()["error"]["code"] == "step_up_required"
    # the lighter path is refused the same way, and nothing is waived
    waived = bob.post("/api/v1/agents/refund-agent/waivers", WAIVER, format="json")
    assert waived.status_code == 403, waived.json()
    assert waived.json()["error"]["code"] == "step_up_required"
    assert not Waiver.objects.exists() and in_force() == []
    # a wrong code is refused too
    secret = enrol(people.bob)
    wrong = bob.post("/api/v1/agents/refund-agent/waivers", {**WAIVER, "otp": "000000"},
                     format="json")
    assert wrong.status_code == 403 and not Waiver.objects.exists()
    lock_passed()
    # with a current code it is granted, and the trail says step-up was given
    granted = bob.post("/api/v1/agents/refund-agent/waivers",
                       {**WAIVER, "otp": next_code(secret)}, format="json")
    assert granted.status_code == 201, granted.json()
    assert granted.json()["step_up"] is True and granted.json()["risk"] == 10
    entry = AuditEntry.objects.get(action="waiver.granted")
    assert entry.after["step_up_given"]["method"] == "totp"
    assert in_force() == ["/tools/crm.search"]


def test_a_change_needing_two_approvers_makes_its_waiver_need_two(api_as, people):
    approved_agent(people, "refund-agent")
    guardrail(api_as(people.dana))
    bob, carol = api_as(people.bob), api_as(people.carol)
    granted = bob.post("/api/v1/agents/refund-agent/waivers", WAIVER, format="json")
    assert granted.status_code == 201, granted.json()
    body = granted.json()
    assert (body["state"], body["required_approvals"]) == ("pending", 2)
    assert in_force() == []  # bob alone waives nothing
    waiver = body["id"]
    # bob cannot be his own second approver; the owner cannot be one either
    assert bob.post(f"/api/v1/waivers/{waiver}/approve", {}, format="json").status_code == 403
    assert api_as(people.alice).post(f"/api/v1/waivers/{waiver}/approve", {},
                                     format="json").status_code == 403
    assert in_force() == []
    confirmed = carol.post(f"/api/v1/waivers/{waiver}/approve", {}, format="json")
    assert confirmed.status_code == 200, confirmed.json()
    assert (confirmed.json()["state"], confirmed.json()["confirmed_by"]) == ("active", "carol")
    assert in_force() == ["/tools/crm.search"]
    assert AuditEntry.objects.filter(action="waiver.confirmed", actor="carol").exists()
    again = api_as(people.dana).post(f"/api/v1/waivers/{waiver}/approve", {}, format="json")
    assert again.status_code == 409


def test_a_denied_change_cannot_be_waived(api_as, people):
    approved_agent(people, "refund-agent")
    guardrail(api_as(people.dana), name="no-admin-on-payments", effect="deny",
              expression="spec.data.all(d, d.resource != 'payments' || d.access != 'admin')",
              message="never admin on payments", required_approvals=1)
    answer = api_as(people.bob).post("/api/v1/agents/refund-agent/waivers",
                                     {**WAIVER, "pointer": "/data/payments"}, format="json")
    assert answer.status_code == 422, answer.json()
    assert answer.json()["error"]["code"] == "guardrail_denied"
    assert not Waiver.objects.exists()


def test_an_unguarded_specific_waiver_is_in_force_at_once(api_as, people):
    approved_agent(people, "refund-agent")
    answer = api_as(people.dana).post("/api/v1/agents/refund-agent/waivers",
                                      {**WAIVER, "pointer": "/model"}, format="json")
    assert answer.status_code == 201, answer.json()
    assert (answer.json()["state"], answer.json()["risk"]) == ("active", 0)
    assert in_force() == ["/model"]


def test_a_waiver_whose_area_is_not_a_spec_change_needs_two(api_as, people):
    approved_agent(people, "refund-agent")
    answer = api_as(people.bob).post("/api/v1/agents/refund-agent/waivers",
                                     {**WAIVER, "pointer": "/mcp_servers/files"}, format="json")
    assert answer.status_code == 201, answer.json()
    assert (answer.json()["state"], answer.json()["required_approvals"]) == ("pending", 2)


def test_the_page_grants_with_a_code_and_a_second_approver_signs_it(people, api_as, settings):
    approved_agent(people, "refund-agent")
    settings.STEPUP_RISK_THRESHOLD = 5
    guardrail(api_as(people.dana))
    bob_secret, carol_secret = enrol(people.bob), enrol(people.carol)
    bob = Client()
    bob.force_login(people.bob)
    page = bob.post("/agents/refund-agent/waivers", {**WAIVER, "otp": ""}, follow=True)
    assert "step-up" in page.content.decode() and not Waiver.objects.exists()
    page = bob.post("/agents/refund-agent/waivers", {**WAIVER, "otp": next_code(bob_secret)},
                    follow=True).content.decode()
    waiver = Waiver.objects.get()
    assert waiver.state == "pending" and "pending a second approver" in page
    carol = Client()
    carol.force_login(people.carol)
    shown = carol.get("/agents/refund-agent/").content.decode()
    assert f'id="approve-waiver-{waiver.pk}"' in shown
    carol.post(f"/waivers/{waiver.pk}/approve", {"otp": totp(carol_secret)}, follow=True)
    waiver.refresh_from_db()
    assert waiver.state == "active" and waiver.confirmed_by == people.carol
