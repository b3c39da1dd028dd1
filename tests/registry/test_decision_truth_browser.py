"""Bob reads what an agent waits on in words he can decide (the order, the customer, the reason,
the amount as money), and an answer after the agent stopped waiting is refused as too late,
shown as an error, never as "resolved: allow". In Chromium against the real ASGI server."""

import pytest
from django.utils import timezone

from runtime import actions as runtime_actions
from runtime.models import Decision
from tests.conftest import approved_agent, eventually
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser


def test_an_answer_after_the_agent_stopped_waiting_is_refused_in_words_that_say_so(
        people, live_server_process, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    agent = approved_agent(people, "refund-agent")
    decision = runtime_actions.request_decision(agent, {
        "tool": "payments.refund", "wait_seconds": 8,
        "arguments": {"amount": "640.0", "order_id": "A-1001", "customer": "C-77",
                      "reason": "parcel lost"}}, actor=people.alice)
    assert decision.status == "pending"
    browser_passwords()
    base = live_server_process.url
    with sync_playwright() as playwright:
        bob = Browser(playwright, base).page("bob")
        bob.goto(f"{base}/inbox/")
        row = bob.locator("tr.inbox-item[data-kind=decision]")
        expect(row).to_contain_text(
            "asks to run payments.refund of $640 (customer C-77, order_id A-1001, reason "
            "parcel lost)")
        assert "640.0" not in row.inner_text()
        row.locator("summary").click()
        row.locator("input[name=comment]").fill("looks fine")
        # The agent waits 8 s; bob answers after that.
        eventually(lambda: timezone.now() > decision.expires_at, timeout=30)
        row.get_by_role("button", name="Allow").click()
        refusal = bob.get_by_role("alert")
        expect(refusal).to_contain_text("Not done")
        expect(refusal).to_contain_text("refund-agent waited 8 s and stopped waiting")
        expect(refusal).to_contain_text("moved on")
        expect(bob.locator(".message-success")).to_have_count(0)
        assert "resolved: allow" not in bob.locator("body").inner_text()
    assert Decision.objects.get(pk=decision.pk).outcome != "allow"
