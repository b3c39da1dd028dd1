"""The agent page as Argo CD's app page: health, sync, generation, last verified and open
findings at the top; the differing lines of desired versus actual first; YAML collapsed; the
header also served alone for the live refresh."""

import re

import pytest

from reconciliation import actions
from registry.choices import Role
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, approved_agent, make_person, shadow_on

pytestmark = pytest.mark.django_db


@pytest.fixture
def drifted(people, refund_agent):
    actions.reconcile_agent(refund_agent.pk, trigger="approved")
    shadow_on(people, refund_agent)  # drift stays
    sandbox_actions.sandbox_deploy(refund_agent, actor="system:test", changes=BAD_DEPLOYMENT,
                           reason="bad deployment")
    actions.reconcile_agent(refund_agent.pk, trigger="observation")
    return refund_agent


def test_the_header_leads_with_health_sync_and_open_findings(people, client, drifted):
    client.force_login(people.dana)
    page = client.get("/agents/refund-agent/").content.decode()
    header = page.index('id="agent-summary"')
    assert header < page.index('id="meta-h"')  # before the metadata
    assert 'data-health="escalated"' in page and 'data-sync="out_of_sync"' in page
    assert "refund-agent gained tool crm.search" in page
    assert "refund-agent gained write access to crm" in page
    assert re.search(r'Last verified</dt><dd id="agent-verified"><time datetime="[^"]+" '
                     r'title="[^"]+ UTC">', page)


def test_differing_lines_come_first_and_yaml_is_collapsed(people, client, drifted):
    client.force_login(people.dana)
    page = client.get("/agents/refund-agent/").content.decode()
    compare = page[page.index('id="compare"'):]
    differences = compare[:compare.index("<details")]
    assert "crm.search" in differences and "lines differ" in differences
    assert 'class="equal"' not in differences  # only differing lines before the full view
    assert '<details class="yaml-block"><summary>Show the latest observed state' in page
    assert '<details class="yaml-block"><summary>Show the active manifest' in page


def test_the_header_alone_turns_in_policy_once_corrected(people, client):
    agent = approved_agent(people, "fixed-agent", enforcement={"default": "correct"})
    actions.reconcile_agent(agent.pk, trigger="approved")
    shadow_on(people, agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")
    client.force_login(people.dana)
    before = client.get("/agents/fixed-agent/status").content.decode()
    assert 'data-health="drifted"' in before and 'data-count="0"' not in before
    actions.set_shadow(actor=people.alice, agent=agent, enabled=False)
    actions.reconcile_agent(agent.pk, trigger="observation")  # corrects
    actions.reconcile_agent(agent.pk, trigger="observation")  # verifies
    after = client.get("/agents/fixed-agent/status").content.decode()
    assert 'data-health="in_policy"' in after and 'data-sync="synced"' in after
    assert "No open findings" in after and "<html" not in after


def test_another_owner_sees_health_but_not_the_findings(people, client, drifted):
    client.force_login(make_person("oscar", Role.OWNER))
    fragment = client.get("/agents/refund-agent/status").content.decode()
    page = client.get("/agents/refund-agent/").content.decode()
    for html in (fragment, page):
        assert 'data-health="escalated"' in html
        assert "crm.search" not in html.split('id="agent-summary"')[-1][:3000]
        assert 'id="open-findings"' not in html


def test_the_header_needs_a_signed_in_person(client, drifted, agent_client):
    assert client.get("/agents/refund-agent/status").status_code == 302
    assert agent_client.get("/agents/refund-agent/status").status_code == 302
    client.force_login(drifted.owner)
    assert client.get("/agents/no-such-agent/status").status_code == 404
