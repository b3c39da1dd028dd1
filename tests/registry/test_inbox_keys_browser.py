"""Bob works his inbox from the keyboard, in Chromium against the real ASGI server: ? lists the
shortcuts, j / k move the selection, a opens an item at its approve button without sending
anything, and the button then does what a click does: a proposal that needs step-up is still
refused without a code, and a decision is answered with its required comment."""

import pytest

from registry import actions
from registry.models import Approval
from runtime import actions as runtime_actions
from tests.conftest import approved_agent
from tests.registry.test_inbox_queue import proposal_by_alice
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser

FOCUSED = "() => (document.activeElement.innerText || document.activeElement.name || '').trim()"


def test_bob_moves_opens_and_approves_from_the_keyboard_without_bypassing_step_up(
        people, live_server_process, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    agent = approved_agent(people, "refund-agent")
    actions.create_guardrail(actor=people.dana, name="model-changes",
                             expression='spec.model == "gpt-4.1"', effect="step_up",
                             message="changing the model needs a second factor")
    proposal = proposal_by_alice(agent, model="gpt-5")
    decision = runtime_actions.request_decision(
        agent, {"action": "payments.refund", "amount": 800}, actor=people.alice)
    with sync_playwright() as playwright:
        browser = Browser(playwright, live_server_process.url)
        bob = browser.page("bob")
        bob.goto(f"{live_server_process.url}/inbox/")
        rows = bob.locator("tr.inbox-item")
        expect(rows).to_have_count(2)
        assert [rows.nth(i).get_attribute("data-kind") for i in range(2)] == [
            "decision", "proposal"]

        bob.keyboard.press("?")
        shortcuts = bob.get_by_role("dialog", name="Keyboard shortcuts")
        expect(shortcuts).to_be_visible()
        expect(shortcuts.locator("dt")).to_have_text(["j", "k", "e", "a", "?", "Esc"])
        expect(shortcuts.locator("dd").first).to_have_text("next item")
        bob.keyboard.press("Escape")
        expect(shortcuts).to_be_hidden()

        for key, selected in (("j", 0), ("j", 1), ("k", 0), ("j", 1)):
            bob.keyboard.press(key)
            expect(rows.nth(selected)).to_have_attribute("aria-selected", "true")
            expect(rows.nth(1 - selected)).to_have_attribute("aria-selected", "false")

        # a: the proposal opens at its approve button; nothing is sent yet
        bob.keyboard.press("a")
        expect(rows.nth(1).locator("details")).to_have_attribute("open", "")
        expect(bob.get_by_role("button", name=f"Approve #{proposal.pk}")).to_be_focused()
        assert not Approval.objects.filter(version=proposal).exists()
        # its button, as a click would: step-up is still asked for
        bob.keyboard.press("Enter")
        expect(bob.locator(".messages")).to_contain_text("This approval needs step-up")
        # The keys are the script's at the page's end: a key pressed once the message is
        # drawn but before the script ran was lost (seen on a loaded machine).
        bob.wait_for_load_state("load")
        proposal.refresh_from_db()
        assert proposal.state == "pending"
        assert not Approval.objects.filter(version=proposal).exists()

        # the decision: a puts him in its required comment, then its first answer
        bob.keyboard.press("j")
        expect(rows.nth(0)).to_have_attribute("aria-selected", "true")
        bob.keyboard.press("a")
        assert bob.evaluate("() => document.activeElement.name") == "comment"
        bob.keyboard.type("customer confirmed by phone")
        bob.keyboard.press("Tab")
        assert "Allow once" in bob.evaluate(FOCUSED)
        bob.keyboard.press("Enter")
        expect(bob.locator(".messages")).to_contain_text("resolved")
        browser.browser.close()
    decision.refresh_from_db()
    assert (decision.status, decision.decided_by) == ("approved", people.bob)
    assert browser.problems == []
