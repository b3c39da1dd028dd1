"""Recertification and an expiring waiver through the pages, in a real browser against the real
ASGI server, with a real worker running the jobs scheduled at approval: alice recertifies with
a review date seconds away, bob approves it and waives a drift for seconds; the agent page
shows the date, the waiver and its end, the date passing, and the lifecycle history; the
report lists the agent as overdue; recertifying again puts it back on schedule."""

import pytest

from sandbox import actions as sandbox_actions
from tests.conftest import approved_agent, eventually
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser


def test_a_review_date_and_a_waiver_run_out_on_the_agent_page(people, live_server_process,
                                                              start_worker, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    agent = approved_agent(people, "refund-agent")
    sandbox_actions.ensure_sandbox(agent)
    worker = start_worker("reconcile", "default")
    page_url = f"{live_server_process.url}/agents/refund-agent/"
    with sync_playwright() as playwright:
        browser = Browser(playwright, live_server_process.url)
        alice = browser.page("alice")
        alice.goto(page_url)
        expect(alice.locator("#review-due")).to_contain_text("scheduled")
        alice.fill("#recertify-comment", "reviewed with the payments team")
        alice.fill("#recertify-after", "8s")
        alice.click("#recertify")
        expect(alice.locator(".messages")).to_contain_text("Proposed recertifying")
        proposal_url = alice.url

        bob = browser.page("bob")
        bob.goto(proposal_url)
        bob.get_by_role("button", name="Approve").click()
        expect(bob.locator(".messages")).to_contain_text("generation 2")
        bob.goto(page_url)
        bob.fill("#waiver-pointer", "/tools/crm.search")
        bob.fill("#waiver-reason", "CRM lookups during the migration")
        bob.fill("#waiver-ticket", "CHG-1234")
        bob.fill("#waiver-duration", "5s")
        bob.get_by_role("button", name="Grant waiver").click()
        expect(bob.locator(".waivers")).to_contain_text("CHG-1234")

        def shows(text: str, where: str) -> bool:
            bob.reload()
            return text in bob.locator(where).inner_text()

        eventually(lambda: shows("No waivers in force", "section[aria-labelledby=waivers-h]"),
                   timeout=90, interval=1, message=worker.output())
        eventually(lambda: shows("overdue", "#review-due"), timeout=90, interval=1,
                   message=worker.output())
        history = bob.locator("table.lifecycle-history")
        # The page says overdue once the date passed; the job then records it (and the status).
        eventually(lambda: shows("recertification.overdue", "table.lifecycle-history")
                   and "waiver.lapsed" in history.inner_text(), timeout=90, interval=1,
                   message=worker.output())
        # A pass settling while the job marked the date writes the condition from what was
        # committed before; the pass the job requests writes ReviewOverdue.
        eventually(lambda: shows("ReviewOverdue", "main"), timeout=90, interval=1,
                   message=worker.output())
        for step in ("recertification.proposed", "agent.recertified", "recertification.due",
                     "recertification.overdue", "waiver.granted"):
            expect(history).to_contain_text(step)
        expect(history).to_contain_text("reviewed with the payments team")

        bob.goto(f"{live_server_process.url}/recertification/")
        expect(bob.locator("#review-refund-agent")).to_contain_text("overdue")
        expect(bob.get_by_role("link", name="Download CSV")).to_be_visible()

        alice.goto(page_url)
        expect(alice.locator("#review-due")).to_contain_text("overdue")
        alice.click("#recertify")
        proposal_url = alice.url
        bob.goto(proposal_url)
        bob.get_by_role("button", name="Approve").click()
        expect(bob.locator(".messages")).to_contain_text("generation 3")
        bob.goto(page_url)
        expect(bob.locator("#review-due")).to_contain_text("scheduled")
        browser.browser.close()
    assert browser.problems == []
