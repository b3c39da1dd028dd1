"""Bob clears a mixed inbox in urgency order, deciding an incident with one decision; alice's
proposal reads like a pull request (her reason, bob's requested changes, a one-line list
diff). In Chromium against the real ASGI server."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from reconciliation import actions
from reconciliation.models import Escalation
from registry.models import DesiredStateVersion
from runtime import actions as runtime_actions
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, REFUND_AGENT_YAML, approved_agent
from tests.registry.test_inbox_queue import bad_deployment, proposal_by_alice
from tests.test_dashboard_browser import Browser, browser_passwords
from tests.test_demo import ARTIFACTS

pytestmark = pytest.mark.browser


@pytest.fixture
def browser_ready(browser_ready):
    """The conftest's, with everyone's password set at once (these tests sign in people the
    fixtures made)."""
    browser_passwords()


def test_bob_clears_a_mixed_inbox_in_urgency_order_and_an_incident_with_one_decision(
        people, shared_server_process, browser_ready, settings):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    settings.DECISION_TIMEOUT_SECONDS = 240  # auto-denied in 4 minutes
    agent = approved_agent(people, "refund-agent")
    proposal = proposal_by_alice(agent, model="gpt-5")
    DesiredStateVersion.objects.filter(pk=proposal.pk).update(
        created_at=timezone.now() - timedelta(hours=1))
    runtime_actions.request_decision(agent, {"action": "payments.refund", "amount": 800},
                             actor=people.alice)
    drifted = bad_deployment(people)
    browser_passwords()  # the people made since
    base = shared_server_process.url
    with sync_playwright() as playwright:
        browser = Browser(playwright, base)
        bob = browser.page("bob")
        bob.goto(f"{base}/inbox/")
        rows = bob.locator("tr.inbox-item")
        expect(rows).to_have_count(3)
        assert [rows.nth(i).get_attribute("data-kind") for i in range(3)] == [
            "decision", "incident", "proposal"]
        expect(rows.nth(0)).to_contain_text(re.compile(r"[34] min left"))
        expect(rows.nth(1)).to_contain_text("3 findings")
        expect(bob.locator("#inbox-count")).to_have_text("3")
        ARTIFACTS.mkdir(exist_ok=True)
        bob.screenshot(path=str(ARTIFACTS / "inbox.png"), full_page=True)

        # the most urgent first: the refund waiting for a human
        first = rows.nth(0)
        first.locator("summary").click()
        first.locator("input[name=comment]").fill("no refunds over 500 today")
        first.get_by_role("button", name="Deny").click()
        expect(bob.locator(".messages")).to_contain_text("resolved: deny")
        expect(rows).to_have_count(2)

        # the incident: three drifts from one deployment, one decision
        incident = rows.nth(0)
        incident.locator("summary").click()
        expect(incident.locator(".incident-findings li")).to_have_count(3)
        incident.locator("input[name=comment]").fill("bad deploy, put it back")
        incident.get_by_role("button", name="Revert").click()
        expect(bob.locator(".messages")).to_contain_text("revert for 3 escalations")
        expect(rows).to_have_count(1)

        proposal_row = rows.nth(0)
        proposal_row.locator("summary").click()
        proposal_row.get_by_role("button", name=f"Approve #{proposal.pk}").click()
        expect(bob.locator(".messages")).to_contain_text(f"Approved proposal #{proposal.pk}")
        bob.goto(f"{base}/inbox/")
        expect(bob.locator("main")).to_contain_text("Nothing is waiting for you.")
        expect(bob.locator("#inbox-count")).to_be_hidden()
        browser.browser.close()
    assert set(Escalation.objects.filter(agent=drifted).values_list("status", flat=True)) == {
        "resolved"}
    assert browser.problems == []


def test_alices_proposal_shows_the_thread_and_a_one_line_list_diff(
        people, shared_server_process, browser_ready):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    approved_agent(people, "refund-agent")
    base = shared_server_process.url
    with sync_playwright() as playwright:
        browser = Browser(playwright, base)
        alice = browser.page("alice")
        alice.goto(f"{base}/manifests/new?agent=refund-agent")
        alice.fill("#manifest", REFUND_AGENT_YAML.replace(
            "tools: [orders.lookup, payments.refund]",
            "tools: [crm.search, orders.lookup, payments.refund]"))
        alice.fill("#reason", "support needs to search customers")
        alice.get_by_role("button", name="Apply").click()
        version = DesiredStateVersion.objects.get(agent__name="refund-agent", state="pending")

        bob = browser.page("bob")
        bob.goto(f"{base}/proposals/{version.pk}/")
        bob.fill("#thread-body", "Read-only first, please")
        bob.get_by_role("button", name="Request changes").click()
        expect(bob.locator(".messages")).to_contain_text("Added to the review thread")

        alice.goto(f"{base}/proposals/{version.pk}/")
        entries = alice.locator(".thread-entry")
        expect(entries).to_have_count(2)
        expect(entries.nth(0)).to_contain_text("support needs to search customers")
        expect(entries.nth(1)).to_contain_text("requested changes")
        expect(entries.nth(1)).to_contain_text("Read-only first, please")
        diff = alice.locator("ul.diff li")
        expect(diff).to_have_count(1)
        expect(diff.first).to_contain_text("/tools/crm.search")
        expect(diff.first).to_have_class("added")
        ARTIFACTS.mkdir(exist_ok=True)
        alice.screenshot(path=str(ARTIFACTS / "proposal-thread.png"), full_page=True)
        expect(alice.get_by_role("button", name="Request changes")).to_have_count(0)
        browser.browser.close()
    assert browser.problems == []


def test_a_bad_deployment_makes_one_alert_line_and_one_toast_per_incident(
        people, shared_server_process, browser_ready):
    """Three findings from one bad deployment: the feed shows one "drift detected" line naming
    the three and linking to them, one "handed to an approver" line, and one toast."""
    import threading

    from django.db import connection
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    agent = approved_agent(people, "payouts-agent", enforcement={"default": "escalate"})
    actions.reconcile_agent(agent.pk, trigger="approved")

    def deploy_badly() -> None:
        try:
            sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="bad")
            actions.reconcile_agent(agent.pk, trigger="observation")
        finally:
            connection.close()

    base = shared_server_process.url
    with sync_playwright() as playwright:
        browser = Browser(playwright, base)
        dana = browser.page("dana")
        expect(dana.locator("#ws-status")).to_have_attribute("data-state", "open")
        sender = threading.Thread(target=deploy_badly)
        sender.start()
        sender.join()
        detected = dana.locator("#alerts li[data-event='drift.detected']")
        expect(detected).to_have_count(1)
        expect(detected).to_have_attribute("data-findings", "3")
        expect(detected).to_contain_text("(3 in this incident)")
        expect(dana.locator("#alerts li[data-event='escalation.opened']")).to_have_count(1)
        toasts = dana.locator("#toasts .toast")
        expect(toasts).to_have_count(1)
        expect(toasts.first).to_contain_text("3 in this incident")
        ARTIFACTS.mkdir(exist_ok=True)
        dana.screenshot(path=str(ARTIFACTS / "alerts-per-incident.png"))
        detected.locator("a").click()
        expect(dana.locator("table.findings tbody tr")).to_have_count(3)
        browser.browser.close()
    assert browser.problems == []
