"""The lifecycle's writes decide who may act before they read the body (issue 29 item 14).

Rollback, recertify, retirement, waiver and retirement approval each told a stranger what was
wrong with the body (400) before telling them the agent is not theirs: a stranger must get 403,
and nothing changes. Someone allowed with the same bad body still gets 400."""

import pytest

from audit.models import AuditEntry
from registry import actions
from registry.choices import Role
from tests.conftest import approved_agent, make_person, token_client

TOO_LONG = "x" * 3000


@pytest.fixture
def oscar(db):
    """An owner who owns none of the agents here."""
    return make_person("oscar", Role.OWNER)


@pytest.fixture
def agent(people):
    return approved_agent(people, "refund-agent")


@pytest.fixture
def retirement(people, agent):
    return actions.propose_retirement("refund-agent", actor=people.alice, reason="done")


BAD_BODIES = [
    ("/api/v1/agents/refund-agent/rollback", {"generation": "one", "comment": TOO_LONG}),
    ("/api/v1/agents/refund-agent/recertify", {"comment": TOO_LONG, "review_after": 12}),
    ("/api/v1/agents/refund-agent/retirement", {"reason": TOO_LONG}),
    ("/api/v1/agents/refund-agent/waivers", {"pointer": 7, "duration": TOO_LONG}),
]


@pytest.mark.django_db
@pytest.mark.parametrize("path, body", BAD_BODIES)
def test_a_stranger_with_a_bad_body_is_refused_403_and_nothing_changes(api_as, oscar, agent,
                                                                       path, body):
    client = api_as(oscar)
    before = AuditEntry.objects.count()
    response = client.post(path, body, format="json")
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] in ("forbidden", "four_eyes", "not_allowed")
    assert AuditEntry.objects.count() == before


@pytest.mark.django_db
@pytest.mark.parametrize("path, body", BAD_BODIES)
def test_another_agents_token_with_a_bad_body_is_refused_403(people, agent, path, body):
    other = approved_agent(people, "other-agent")
    response = token_client(people, other).post(path, body, format="json")
    assert response.status_code == 403, response.content


@pytest.mark.django_db
@pytest.mark.parametrize("path, body", [b for b in BAD_BODIES if "rollback" not in b[0]])
def test_the_agents_own_token_with_a_bad_body_is_refused_403(people, agent, path, body):
    # (an agent may propose its own rollback, as it may propose any spec for itself)
    response = token_client(people, agent).post(path, body, format="json")
    assert response.status_code == 403, response.content


@pytest.mark.django_db
@pytest.mark.parametrize("path, body", [b for b in BAD_BODIES if "waivers" not in b[0]])
def test_the_owner_with_the_same_bad_body_is_told_what_is_wrong(api_as, people, agent, path,
                                                                 body):
    response = api_as(people.alice).post(path, body, format="json")
    assert response.status_code == 400, response.content


@pytest.mark.django_db
def test_an_approver_with_a_bad_waiver_body_is_told_what_is_wrong(api_as, people, agent):
    response = api_as(people.bob).post("/api/v1/agents/refund-agent/waivers",
                                       {"pointer": 7, "duration": TOO_LONG}, format="json")
    assert response.status_code == 400, response.content


@pytest.mark.django_db
def test_a_missing_agent_is_404_to_an_owner_and_403_to_an_agent_token(api_as, people, agent):
    for path, body in BAD_BODIES:
        missing = path.replace("refund-agent", "no-such-agent")
        assert api_as(people.alice).post(missing, body, format="json").status_code in (404,), (
            missing)
        assert token_client(people, agent).post(missing, body,
                                                format="json").status_code == 403, missing


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["alice", "oscar", "carol_as_owner"])
def test_approving_a_retirement_refuses_before_reading_the_body(api_as, people, oscar,
                                                                retirement, who):
    if who == "oscar":
        actor = oscar  # an owner, not an approver
    elif who == "alice":
        actor = people.alice  # proposed it and owns the agent
    else:
        actor = people.alice
        actions.grant_role(people.alice, Role.APPROVER, actor="system:test")
    client = api_as(actor)
    before = AuditEntry.objects.count()
    response = client.post(f"/api/v1/retirements/{retirement.pk}/approve",
                                  {"comment": TOO_LONG, "otp": ["not", "a", "code"]},
                                  format="json")
    assert response.status_code == 403, response.content
    assert AuditEntry.objects.count() == before


@pytest.mark.django_db
def test_an_approver_with_a_bad_retirement_decision_body_is_told_what_is_wrong(
        api_as, people, retirement):
    response = api_as(people.bob).post(f"/api/v1/retirements/{retirement.pk}/approve",
                                       {"comment": TOO_LONG}, format="json")
    assert response.status_code == 400, response.content
    missing = api_as(people.bob).post("/api/v1/retirements/999999/approve",
                                      {"comment": TOO_LONG}, format="json")
    assert missing.status_code == 404, missing.content


@pytest.mark.django_db
@pytest.mark.parametrize("path, body, field_error", [
    ("/agents/refund-agent/rollback", {"generation": "one"}, "choose an approved generation"),
    ("/agents/refund-agent/retirement", {"reason": ""}, "say why"),
    ("/agents/refund-agent/recertify", {"review_after": "x" * 40}, "check the fields"),
    ("/agents/refund-agent/waivers", {"pointer": ""}, "pointer, reason, ticket"),
])
def test_the_pages_forms_say_not_yours_before_judging_the_fields(client, oscar, agent, path,
                                                                 body, field_error):
    client.force_login(oscar)
    before = AuditEntry.objects.count()
    page = client.post(path, body, follow=True).content.decode()
    assert field_error not in page
    assert "owned by alice" in page or "Only approvers" in page
    assert AuditEntry.objects.count() == before
