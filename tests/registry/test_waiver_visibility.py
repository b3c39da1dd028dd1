"""An agent's waivers are shown to whom its findings are shown (issue 29 item 13): its owner
and the reviewers. Another owner read every waiver (pointer, reason, ticket, grantor) through
the API and the agent page while the agent's findings were 403 to him."""

import pytest

from registry import actions
from registry.choices import Role
from tests.conftest import approved_agent, make_person, token_client

WAIVER = {"pointer": "/tools/crm.search", "reason": "CRM lookups during the migration",
          "ticket": "CHG-1234", "duration": "1h"}


@pytest.fixture
def waived(people):
    agent = approved_agent(people, "refund-agent")
    actions.grant_waiver("refund-agent", actor=people.dana, **WAIVER)
    return agent


@pytest.fixture
def oscar(db):
    return make_person("oscar", Role.OWNER)


@pytest.mark.django_db
def test_another_owner_reads_neither_the_findings_nor_the_waivers(api_as, oscar, waived):
    client = api_as(oscar)
    assert client.get("/api/v1/findings?agent=refund-agent").status_code == 403
    response = client.get("/api/v1/agents/refund-agent/waivers")
    assert response.status_code == 403, response.content
    assert "CHG-1234" not in response.content.decode()


@pytest.mark.django_db
def test_another_owners_agent_page_shows_no_waiver(client, oscar, waived):
    client.force_login(oscar)
    page = client.get("/agents/refund-agent/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "CHG-1234" not in body and "CRM lookups during the migration" not in body
    assert "Waivers in force" not in body


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["alice", "bob", "dana"])
def test_the_owner_and_the_reviewers_read_them_on_the_api_and_the_page(api_as, client, people,
                                                                       waived, who):
    person = getattr(people, who)
    listed = api_as(person).get("/api/v1/agents/refund-agent/waivers")
    assert listed.status_code == 200
    assert [w["ticket"] for w in listed.json()] == ["CHG-1234"]
    client.force_login(person)
    assert "CHG-1234" in client.get("/agents/refund-agent/").content.decode()


@pytest.mark.django_db
def test_an_agent_token_reads_no_waivers_of_another_agent(people, waived):
    other = approved_agent(people, "other-agent")
    response = token_client(people, other).get("/api/v1/agents/refund-agent/waivers")
    assert response.status_code in (401, 403), response.content
    assert "CHG-1234" not in response.content.decode()
