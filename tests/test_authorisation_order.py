"""Authorisation is decided before validation, and a missing thing is 404 (issue 12 item 10).

A stranger who sends a bad body for someone else's agent, proposal, escalation or finding must
be told "not yours" (403), never what is wrong with the body (422/400): that would let them
probe what they may not touch. Someone allowed who names a thing that does not exist gets 404,
not a conflict. Every write endpoint that takes a body is tried; nothing changes.
"""

import pytest

from audit.models import AuditEntry
from reconciliation import actions as reconciliation_actions
from registry import actions
from registry.choices import Role
from tests.conftest import REFUND_AGENT_YAML, make_person

TOO_LONG = "x" * 3000  # every free-text field of the API stops at 2,000 characters
INVALID_SPEC = {"spec": {"tools": "not a list", "surprise": True}}
MISSING = 999_999


@pytest.fixture
def oscar(db):
    """An owner who owns none of the agents here."""
    return make_person("oscar", Role.OWNER)


@pytest.fixture
def escalation(refund_agent):
    return reconciliation_actions.open_escalation(refund_agent, None, reason="drift")


@pytest.fixture
def pending(people, refund_agent):
    from tests.conftest import refund_manifest

    return actions.propose(refund_agent, refund_manifest(model="gpt-5").spec,
                           refund_agent.active_version.metadata, actor=people.alice,
                           source="api").version


def assert_refused(response, status: int) -> None:
    assert response.status_code == status, response.content
    assert "error" in response.json()


def test_an_invalid_spec_for_another_owners_agent_is_403(api_as, oscar, refund_agent):
    client = api_as(oscar)
    before = AuditEntry.objects.count()
    response = client.post("/api/v1/agents/refund-agent/proposals", INVALID_SPEC,
                           format="json")
    assert_refused(response, 403)
    assert AuditEntry.objects.count() == before


def test_an_agent_token_with_an_invalid_spec_for_another_agent_is_403(people, refund_agent):
    from tests.conftest import approved_agent, token_client

    other = approved_agent(people, "other-agent")
    response = token_client(people, other).post("/api/v1/agents/refund-agent/proposals",
                                                INVALID_SPEC, format="json")
    assert_refused(response, 403)


def test_an_invalid_manifest_for_another_owners_agent_is_403(api_as, oscar, refund_agent):
    broken = REFUND_AGENT_YAML.replace("tools: [orders.lookup, payments.refund]",
                                       "tools: 12\n  nonsense: true")
    response = api_as(oscar).generic("POST", "/api/v1/manifests", broken,
                                     content_type="application/yaml")
    assert_refused(response, 403)


def test_an_invalid_manifest_registering_an_agent_for_someone_else_is_403(api_as, oscar,
                                                                           people):
    broken = (REFUND_AGENT_YAML.replace("name: refund-agent", "name: new-agent")
              .replace("version: \"2.3.0\"", "version: [1, 2]"))
    response = api_as(oscar).generic("POST", "/api/v1/manifests", broken,
                                     content_type="application/yaml")
    assert_refused(response, 403)


def test_the_owners_own_invalid_manifest_is_still_422(api_as, people, refund_agent):
    broken = REFUND_AGENT_YAML.replace("tools: [orders.lookup, payments.refund]", "tools: 12")
    response = api_as(people.alice).generic("POST", "/api/v1/manifests", broken,
                                            content_type="application/yaml")
    assert_refused(response, 422)


def test_the_manifest_editor_refuses_a_strangers_invalid_manifest(client, oscar,
                                                                  refund_agent):
    client.force_login(oscar)
    broken = REFUND_AGENT_YAML.replace("tools: [orders.lookup, payments.refund]", "tools: 12")
    page = client.post("/manifests/new", {"manifest": broken}).content.decode()
    assert "owned by alice" in page
    assert "/spec/tools" not in page


def test_triage_of_an_escalation_that_does_not_exist_is_404(api_as, people, refund_agent):
    response = api_as(people.bob).post(f"/api/v1/escalations/{MISSING}/triage",
                                       {"assign": True}, format="json")
    assert_refused(response, 404)
    # and with a body that is wrong as well: still 404, not a complaint about the body
    response = api_as(people.bob).post(f"/api/v1/escalations/{MISSING}/triage",
                                       {"snooze_minutes": -5}, format="json")
    assert_refused(response, 404)


def test_resolving_an_escalation_that_does_not_exist_is_404(api_as, people):
    response = api_as(people.bob).post(f"/api/v1/escalations/{MISSING}/resolve",
                                       {"resolution": "nonsense"}, format="json")
    assert_refused(response, 404)


def test_triage_of_a_resolved_escalation_is_still_409(api_as, people, escalation):
    reconciliation_actions.resolve_escalation(escalation.pk, actor=people.bob,
                                              resolution="suspend", comment="stop it")
    response = api_as(people.carol).post(f"/api/v1/escalations/{escalation.pk}/triage",
                                         {"assign": True}, format="json")
    assert_refused(response, 409)


def test_an_owner_approver_sending_bad_triage_for_their_own_agent_is_403(api_as, people,
                                                                         escalation):
    actions.grant_role(people.alice, Role.APPROVER, actor="system:test")
    client = api_as(people.alice)
    response = client.post(f"/api/v1/escalations/{escalation.pk}/triage",
                           {"snooze_minutes": -5}, format="json")
    assert_refused(response, 403)
    response = client.post(f"/api/v1/escalations/{escalation.pk}/resolve",
                           {"resolution": "nonsense", "comment": ""}, format="json")
    assert_refused(response, 403)


def test_an_owner_rejecting_with_no_comment_is_403(api_as, people, pending):
    response = api_as(people.alice).post(f"/api/v1/proposals/{pending.pk}/reject",
                                         {"comment": ""}, format="json")
    assert_refused(response, 403)
    response = api_as(people.alice).post(f"/api/v1/proposals/{pending.pk}/approve",
                                         {"comment": TOO_LONG}, format="json")
    assert_refused(response, 403)


def test_deciding_a_proposal_that_does_not_exist_is_404(api_as, people):
    response = api_as(people.bob).post(f"/api/v1/proposals/{MISSING}/reject",
                                       {"comment": TOO_LONG}, format="json")
    assert_refused(response, 404)


def test_an_approver_acknowledging_a_finding_with_a_bad_body_is_403(api_as, people,
                                                                    refund_agent):
    response = api_as(people.bob).post(f"/api/v1/findings/{MISSING}/acknowledge",
                                       {"reason": TOO_LONG}, format="json")
    assert_refused(response, 403)
    response = api_as(people.dana).post(f"/api/v1/findings/{MISSING}/acknowledge",
                                        {"reason": ""}, format="json")
    assert_refused(response, 404)


@pytest.mark.parametrize("path, body", [
    ("/api/v1/guardrails", {"name": "Bad Name!", "expression": "(", "effect": "nope"}),
    ("/api/v1/control/breaker/reset", {"reason": TOO_LONG}),
    ("/api/v1/control/shadow", {"enabled": "perhaps"}),
    ("/api/v1/unregistered/shadow-agent/assign", {"owner": TOO_LONG}),
])
def test_compliance_writes_refuse_others_before_reading_the_body(api_as, people, path, body):
    assert_refused(api_as(people.bob).post(path, body, format="json"), 403)


@pytest.mark.parametrize("path", [
    "/api/v1/escalations/abc/triage", "/api/v1/escalations/abc/resolve",
    "/api/v1/proposals/abc/approve", "/api/v1/proposals/abc/reject",
    "/api/v1/findings/abc/acknowledge"])
def test_an_id_that_is_not_a_number_is_404_not_a_500(api_as, people, path):
    for who in (people.bob, people.dana):
        assert_refused(api_as(who).post(path, {}, format="json"), 404)


def test_the_pages_forms_say_four_eyes_before_judging_the_comment(client, people, pending,
                                                                  escalation):
    actions.grant_role(people.alice, Role.APPROVER, actor="system:test")
    client.force_login(people.alice)
    page = client.post(f"/proposals/{pending.pk}/reject", {"comment": TOO_LONG},
                       follow=True).content.decode()
    assert "Four eyes" in page and "too long" not in page
    page = client.post(f"/escalations/{escalation.pk}/triage", {"triage": "nonsense"},
                       follow=True).content.decode()
    assert "Four eyes" in page
