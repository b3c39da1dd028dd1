"""The live dashboard in a real browser against the real ASGI server, a real RQ worker and
real Redis: dana watches a drift arrive and get corrected without reloading; bob resolves an
escalation from his queue; the charts render from the local plotly.js; nothing leaves the
machine. Screenshots go to artifacts/."""

import re

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User

from reconciliation.models import Escalation
from registry.models import Agent
from tests.conftest import PASSWORD, approved_agent, eventually
from tests.test_demo import ARTIFACTS, CHROMIUM_ARGS

pytestmark = pytest.mark.browser



class Browser:
    """Signed-in pages that record console errors, failed and off-machine requests."""

    def __init__(self, playwright, base: str) -> None:
        self.browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                                  args=CHROMIUM_ARGS)
        self.base = base
        self.problems: list[str] = []

    def page(self, username: str, width: int = 1280):
        context = self.browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        page.on("console", lambda m: self.problems.append(m.text) if m.type == "error" else None)
        page.on("response", lambda r: self.problems.append(f"{r.status} {r.url}")
                if r.status >= 400 else None)
        page.on("request", lambda r: None if r.url.startswith(("http://127.0.0.1", "ws://127"))
                else self.problems.append(f"left the machine: {r.url}"))
        page.goto(f"{self.base}/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/$"))
        return page


def test_drift_arrives_live_is_corrected_and_bob_resolves_an_escalation(
        people, live_server_process, start_worker, monkeypatch):
    from playwright.sync_api import expect, sync_playwright

    # Playwright's sync API keeps an idle event loop on this thread; the test's own ORM reads
    # in between browser steps are plain blocking calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    # The server process checks passwords with the production hashers.
    hasher = PBKDF2PasswordHasher()
    User.objects.update(password=hasher.encode(PASSWORD, hasher.salt()))
    refund = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    approved_agent(people, "payouts-agent",
                   enforcement={"default": "correct", "actions": "escalate"})
    worker = start_worker("reconcile", "ingest", "default")
    eventually(lambda: Agent.objects.filter(status__health="in_policy").count() == 2,
               timeout=60, message=f"never converged; worker said:\n{worker.output()}")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = Browser(playwright, live_server_process.url)
        dana = browser.page("dana")
        expect(dana.locator("#ws-status")).to_have_attribute("data-state", "open")
        expect(dana.locator("#chart-drift .main-svg").first).to_be_attached()

        lab = browser.page("dana")  # another session injects the drift
        lab.goto(f"{live_server_process.url}/lab/")
        lab.select_option("#lab-agent", "refund-agent")
        lab.click("button[value=drift]")
        expect(lab.locator(".messages")).to_contain_text("bad deployment")

        feed = dana.locator("#alerts")
        expect(feed.locator("li[data-event='drift.detected']").first).to_contain_text(
            "refund-agent", timeout=15_000)
        expect(feed.locator("li[data-event='drift.corrected']").first).to_contain_text(
            "refund-agent", timeout=15_000)
        expect(dana.locator("[data-health='in_policy']")).to_have_text("2", timeout=15_000)
        # The counters and charts were refreshed from /api/v1/dashboard after the alerts.
        expect(dana.locator("#counters")).to_have_attribute("data-refreshed", re.compile("."),
                                                            timeout=15_000)
        expect(dana.locator("#chart-drift .bars .point").first).to_be_attached()
        dana.wait_for_timeout(6500)  # let the toasts fade before the screenshot
        dana.screenshot(path=str(ARTIFACTS / "overview-live.png"), full_page=True)
        assert refund.findings.filter(status="corrected").count() == 3

        lab.select_option("#lab-agent", "payouts-agent")
        lab.click("button[value=drift]")
        escalation = eventually(lambda: Escalation.objects.filter(
            agent__name="payouts-agent", status="open").first(), timeout=30,
            message=f"no escalation; worker said:\n{worker.output()}")
        expect(feed.locator("li[data-event='escalation.opened']").first).to_contain_text(
            "payouts-agent", timeout=15_000)

        bob = browser.page("bob")
        bob.goto(f"{live_server_process.url}/escalations/")
        card = bob.locator(f"#esc-{escalation.pk}").locator("xpath=..")
        bob.screenshot(path=str(ARTIFACTS / "escalations.png"), full_page=True)
        card.locator("textarea").fill("the $500 rule is policy")
        card.locator("button[value=revert]").click()
        expect(bob.locator(".messages")).to_contain_text("resolved: revert")
        eventually(lambda: Escalation.objects.get(pk=escalation.pk).status == "resolved")
        eventually(lambda: Agent.objects.get(name="payouts-agent").sandbox.state["actions"][
            "payments.refund"].get("approval_above") == 500, timeout=30,
            message=f"revert not applied; worker said:\n{worker.output()}")

        for path, name in (("/agents/refund-agent/", "agent"), ("/findings/", "findings"),
                           ("/approvals/", "approvals"), ("/lab/", "lab")):
            viewer = bob if name == "approvals" else dana
            viewer.goto(f"{live_server_process.url}{path}")
            viewer.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        phone = browser.page("dana", width=390)
        phone.screenshot(path=str(ARTIFACTS / "overview-phone.png"), full_page=True)
        browser.browser.close()
    assert browser.problems == []
