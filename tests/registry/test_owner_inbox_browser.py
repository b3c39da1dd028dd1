"""alice's reminder in a real browser against the real ASGI server: the Inbox link in her
navigation counts it, /inbox/ lists "recertify refund-agent by <date>", its link opens the
agent page at the recertify form, and once she proposes the recertification the inbox is empty
and the badge gone."""

import pytest

from tests.conftest import approved_agent
from tests.registry.test_owner_inbox import due_in
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser


def test_alice_follows_her_reminder_from_the_inbox_to_the_recertify_form(
        people, live_server_process, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    due_in(approved_agent(people, "refund-agent"), days=2)
    with sync_playwright() as playwright:
        browser = Browser(playwright, live_server_process.url)
        alice = browser.page("alice")
        alice.goto(f"{live_server_process.url}/agents/")
        expect(alice.locator("#inbox-count")).to_have_text("1")
        alice.get_by_role("link", name="Inbox").click()
        item = alice.locator("tr.inbox-item[data-kind=recertification]")
        expect(item).to_have_count(1)
        expect(item).to_contain_text("recertify refund-agent by")
        expect(item).to_contain_text("left")  # the urgency column: time to the review date
        item.locator("summary").click()
        item.get_by_role("link", name="Recertify refund-agent").click()
        expect(alice).to_have_url(f"{live_server_process.url}/agents/refund-agent/"
                                  "#recertify-comment")
        expect(alice.locator("#recertify-comment")).to_be_visible()
        alice.fill("#recertify-comment", "still right for refunds")
        alice.click("#recertify")
        expect(alice.locator(".messages")).to_contain_text("Proposed recertifying")

        alice.goto(f"{live_server_process.url}/inbox/")
        expect(alice.locator("tr.inbox-item")).to_have_count(0)
        expect(alice.locator("main")).to_contain_text("Nothing is waiting for you.")
        expect(alice.locator("#inbox-count")).to_be_hidden()

        bob = browser.page("bob")  # bob decides the proposal; alice's reminder is not his
        bob.goto(f"{live_server_process.url}/inbox/?kind=recertification")
        expect(bob.locator("tr.inbox-item")).to_have_count(0)
        assert browser.problems == []
