"""One bad deployment across three agents: alice reads on her agent's page what caused the
drift and, in one click, every agent and finding that change touched; bob decides it as one
incident, not three. In Chromium against the real server."""

import pytest

from reconciliation import actions
from reconciliation.models import Escalation, Finding
from registry.models import Agent
from sandbox.lab import mass_drift
from tests.conftest import approved_agent
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser
NAMES = ("payouts-agent", "refund-agent", "support-agent")



def test_one_deployment_across_three_agents_is_one_incident_its_owner_can_trace(
        people, live_server_process, browser_ready):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    for name in NAMES:  # alice's, every area escalating to a human
        agent = approved_agent(people, name, enforcement={"default": "escalate"})
        actions.reconcile_agent(agent.pk, trigger="approved")
    assert len(mass_drift(3, actor=people.dana)) == 3  # the drift lab's bad deployment
    for agent in Agent.objects.filter(name__in=NAMES):
        actions.reconcile_agent(agent.pk, trigger="observation")
    (cause,) = set(Finding.objects.values_list("cause_key", flat=True))
    assert cause.startswith("deployment:")
    deployment_id = cause.removeprefix("deployment:")
    browser_passwords()
    base = live_server_process.url
    with sync_playwright() as playwright:
        browser = Browser(playwright, base)

        # Alice, on her agent's page: the cause of each drift, and what else it touched.
        alice = browser.page("alice")
        alice.goto(f"{base}/agents/refund-agent/")
        row = alice.locator("table.findings tbody tr", has_text="/tools/crm.search")
        expect(row.locator("td.cause")).to_contain_text(f"deployment {deployment_id} by dana")
        expect(row.locator("td.cause")).to_contain_text("drift lab: a bad deployment")
        row.get_by_role("link", name="What this change touched").click()
        touched = alice.locator("#touched .touched-agents li")
        expect(touched).to_have_count(3)
        for i, name in enumerate(NAMES):
            expect(touched.nth(i)).to_contain_text(f"{name}: 3 findings")
        expect(alice.locator("table.findings tbody tr")).to_have_count(9)

        # Bob: one incident for the one change, decided once.
        bob = browser.page("bob")
        bob.goto(f"{base}/inbox/?kind=escalation")
        rows = bob.locator("tr.inbox-item")
        expect(rows).to_have_count(1)
        expect(bob.locator("#inbox-count")).to_have_text("1")
        incident = rows.first
        expect(incident).to_contain_text("on 3 agents (payouts-agent, refund-agent, "
                                         "support-agent)")
        incident.locator("summary").click()
        expect(incident.locator(".incident-findings li")).to_have_count(9)
        incident.locator("input[name=comment]").fill("bad deploy everywhere, put it back")
        incident.get_by_role("button", name="Revert").click()
        expect(bob.locator(".messages")).to_contain_text("revert for 9 escalations")
        expect(rows).to_have_count(0)
        browser.browser.close()
    assert set(Escalation.objects.values_list("status", flat=True)) == {"resolved"}
    assert browser.problems == []
