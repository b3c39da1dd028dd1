"""The pages without a mouse, on a phone, and without relying on colour, in a real browser
against the real ASGI server: an approver answers a pending decision with the keyboard alone."""

import pytest

from reconciliation import actions as reconciliation
from reconciliation.models import Escalation
from runtime import actions as runtime_actions
from sandbox import actions as sandbox_actions
from tests.conftest import approved_agent
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser

FOCUSED = """() => {
  const el = document.activeElement, style = getComputedStyle(el);
  return {tag: el.tagName.toLowerCase(), id: el.id, text: (el.innerText || "").trim(),
          outline: style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2,
          inMain: !!el.closest("main"), left: el.getBoundingClientRect().left};
}"""

# Everything that carries a colour must also carry words or a sign.
COLOURED = (".sev, .counter, .diff li, .timeline .seg, .cond-true, .cond-false, "
            "[class*='state-'], [class*='lifecycle-'], [class*='risk-'], [class*='outcome-']")


def tab_to(page, element_id: str, limit: int = 40) -> list[dict]:
    """Press Tab until `element_id` has focus; every stop on the way."""
    stops = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        stops.append(page.evaluate(FOCUSED))
        if stops[-1]["id"] == element_id:
            return stops
    raise AssertionError(f"Tab never reached #{element_id}; stops: {stops}")


def test_an_approver_answers_a_decision_with_the_keyboard_alone(
        people, shared_server_process, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    agent = approved_agent(people, "refund-agent")
    decision = runtime_actions.request_decision(
        agent, {"action": "payments.refund", "amount": 800}, actor=people.alice)
    escalation = Escalation.objects.get(decision=decision)
    with sync_playwright() as playwright:
        browser = Browser(playwright, shared_server_process.url)
        bob = browser.page("bob")
        bob.goto(f"{shared_server_process.url}/escalations/")

        # The first Tab shows the skip link on screen; following it skips the navigation.
        bob.keyboard.press("Tab")
        skip = bob.evaluate(FOCUSED)
        assert (skip["text"], skip["outline"]) == ("Skip to content", True) and skip["left"] >= 0
        bob.keyboard.press("Enter")
        stops = tab_to(bob, f"comment-{escalation.pk}")
        assert all(stop["inMain"] for stop in stops), stops
        assert all(stop["outline"] for stop in stops), [s for s in stops if not s["outline"]]

        bob.keyboard.type("customer confirmed by phone")
        bob.keyboard.press("Tab")
        assert "Allow once" in bob.evaluate(FOCUSED)["text"]
        bob.keyboard.press("Enter")
        expect(bob.locator(".messages")).to_contain_text("resolved")
        browser.browser.close()
    decision.refresh_from_db()
    assert (decision.status, decision.outcome, decision.decided_by) == (
        "approved", "allow", people.bob)
    assert decision.comment == "customer confirmed by phone"
    assert browser.problems == []


@pytest.mark.parametrize("width", [390, 1280])
def test_pages_fit_the_screen_and_never_say_it_with_colour_alone(
        people, shared_server_process, monkeypatch, width):
    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    agent = approved_agent(people, "refund-agent")
    sandbox_actions.ensure_sandbox(agent)
    reconciliation.reconcile_agent(agent.pk, trigger="approved")
    from sandbox.lab import inject

    inject(agent, "drift", actor="dana")  # leaves drift, findings and a diff to show
    reconciliation.reconcile_agent(agent.pk, trigger="observation")
    pages = ["/", "/agents/", "/agents/refund-agent/", "/findings/", "/escalations/",
             "/guardrails/", "/audit/", "/lab/", "/toxic/", "/fleet/"]
    with sync_playwright() as playwright:
        browser = Browser(playwright, shared_server_process.url)
        dana = browser.page("dana", width=width)
        for path in pages:
            dana.goto(f"{shared_server_process.url}{path}")
            overflow = dana.evaluate(
                "() => document.documentElement.scrollWidth - window.innerWidth")
            wide = dana.evaluate("""() => [...document.querySelectorAll("main *")]
                .filter(el => el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0
                              && getComputedStyle(el).overflowX === "visible"
                              && !el.closest(".table-scroll, pre"))
                .map(el => el.tagName + "." + el.className).slice(-3)""")
            assert overflow <= 0, (
                f"{path} scrolls sideways by {overflow}px at {width}px: {wide}")
            wordless = dana.evaluate(f"""() => [...document.querySelectorAll("{COLOURED}")]
                .filter(el => !el.innerText.trim() && !el.getAttribute("aria-label"))
                .map(el => el.outerHTML.slice(0, 120))""")
            assert wordless == [], f"{path}: colour with no words: {wordless}"
        browser.browser.close()
    assert browser.problems == []
