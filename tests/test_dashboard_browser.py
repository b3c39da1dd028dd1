"""The live dashboard in a real browser against the real ASGI server, a real RQ worker and
real Redis: dana watches a drift arrive and get corrected without reloading; bob sees his inbox
count rise live and resolves the escalation in place from the inbox; a fresh tab shows recent
alerts and a reconnect repeats none; the charts render from the local plotly.js; nothing leaves
the machine. Screenshots go to artifacts/."""

import re
import signal
import subprocess
import sys
import threading

import pytest
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User

from config import embedded_redis
from reconciliation.models import Escalation
from registry.models import Agent
from tests.conftest import PASSWORD, ROOT, approved_agent, child_env, eventually
from tests.test_demo import ARTIFACTS, CHROMIUM_ARGS, watch_for_csp_violations

pytestmark = pytest.mark.browser



def browser_passwords() -> None:
    """Give every person the test PASSWORD (the suite's fast hasher, the live server's first:
    tests/process_settings.py): call it once everyone the test signs in exists."""
    User.objects.update(password=make_password(PASSWORD))


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
        watch_for_csp_violations(page, self.problems)
        page.goto(f"{self.base}/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/$"))
        return page


def test_drift_arrives_live_is_corrected_and_bob_resolves_an_escalation(
        people, live_server_process, start_worker, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    # Playwright's sync API keeps an idle event loop on this thread; the test's own ORM reads
    # in between browser steps are plain blocking calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    # The server process checks passwords with the production hashers.
    browser_passwords()
    refund = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    approved_agent(people, "payouts-agent",
                   enforcement={"default": "correct", "actions": "escalate"})
    worker = start_worker("reconcile", "ingest", "default")
    eventually(lambda: Agent.objects.filter(status__health="in_policy").count() == 2,
               timeout=60, message=lambda: f"never converged; worker said:\n{worker.output()}")
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

        # bob has his inbox open before the escalation exists: its count goes up live.
        bob = browser.page("bob")
        bob.goto(f"{live_server_process.url}/approvals/")
        expect(bob.locator("#inbox-count")).to_be_hidden()
        bob.wait_for_timeout(1000)  # the inbox's socket is connected

        lab.select_option("#lab-agent", "payouts-agent")
        lab.click("button[value=drift]")
        escalation = eventually(lambda: Escalation.objects.filter(
            agent__name="payouts-agent", status="open").first(), timeout=30,
            message=lambda: f"no escalation; worker said:\n{worker.output()}")
        expect(feed.locator("li[data-event='escalation.opened']").first).to_contain_text(
            "payouts-agent", timeout=15_000)
        expect(bob.locator("#inbox-count")).to_have_text("1", timeout=15_000)
        expect(bob.locator("[data-inbox-count='escalations']")).to_have_text("1")
        bob.click("#inbox-stale a")  # "show the current queue"

        # He resolves it in place, in the inbox, and lands back there.
        card = bob.locator(f"article[data-escalation='{escalation.pk}']")
        expect(card).to_contain_text("action_limit_missing")
        bob.screenshot(path=str(ARTIFACTS / "approvals-escalation.png"), full_page=True)
        card.locator("button[value=assign]").click()
        expect(bob.locator(".messages")).to_contain_text(f"#{escalation.pk} assigned to you")
        card.locator("textarea").fill("the $500 rule is policy")
        card.locator("button[value=revert]").click()
        expect(bob.locator(".messages")).to_contain_text("resolved: revert")
        assert re.search(r"/approvals/#esc-\d+$", bob.url), bob.url
        expect(card).to_have_count(0)
        expect(bob.locator("#inbox-count")).to_be_hidden()
        eventually(lambda: Escalation.objects.get(pk=escalation.pk).status == "resolved")
        assert Escalation.objects.get(pk=escalation.pk).assignee.username == "bob"
        eventually(lambda: Agent.objects.get(name="payouts-agent").sandbox.state["actions"][
            "payments.refund"].get("approval_above") == 500, timeout=30,
            message=lambda: f"revert not applied; worker said:\n{worker.output()}")

        for path, name in (("/agents/refund-agent/", "agent"), ("/findings/", "findings"),
                           ("/approvals/", "approvals"), ("/escalations/", "escalations"),
                           ("/lab/", "lab")):
            viewer = bob if name in ("approvals", "escalations") else dana
            viewer.goto(f"{live_server_process.url}{path}")
            viewer.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        phone = browser.page("dana", width=390)
        phone.screenshot(path=str(ARTIFACTS / "overview-phone.png"), full_page=True)
        browser.browser.close()
    assert browser.problems == []


def publish(*agents: str) -> None:
    """Alerts as the loop writes them: kept, then sent to the browsers once committed (from
    another thread: Playwright keeps an event loop on this one, where async_to_sync refuses)."""
    from django.db import connection, transaction

    from reconciliation import alerts

    def send() -> None:
        try:
            for agent in agents:
                with transaction.atomic():
                    alerts.broadcast("drift.detected", {
                        "agent": agent, "severity": "high", "kind": "tool_added",
                        "pointer": "/tools/0"})
        finally:
            connection.close()

    sender = threading.Thread(target=send)
    sender.start()
    sender.join()


def publish_alerts(alerts_to_send: list[tuple[str, dict]]) -> None:
    """Like publish, with each alert's event and payload given."""
    from django.db import connection, transaction

    from reconciliation import alerts

    def send() -> None:
        try:
            for event, payload in alerts_to_send:
                with transaction.atomic():
                    alerts.broadcast(event, payload)
        finally:
            connection.close()

    sender = threading.Thread(target=send)
    sender.start()
    sender.join()


def restart(server, stopped=None) -> subprocess.Popen:
    """Stop the web server (every browser loses its socket), run `stopped` meanwhile, and
    start it again on the same port."""
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(timeout=15)
    if stopped:
        stopped()
    port = int(server.url.rsplit(":", 1)[1])
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
         "config.asgi:application"], cwd=ROOT, env=child_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    eventually(lambda: embedded_redis.port_answers("127.0.0.1", port), timeout=30,
               message="the web server did not come back")
    return process


def test_a_fresh_tab_shows_recent_alerts_and_a_reconnect_repeats_none(
        people, live_server_process, monkeypatch):
    from playwright.sync_api import expect

    from reconciliation.models import AlertEvent
    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    publish("history-1", "history-2", "history-3")
    again = None
    with sync_playwright() as playwright:
        browser = Browser(playwright, live_server_process.url)
        try:
            dana = browser.page("dana")  # a fresh tab: nothing remembered
            items = dana.locator("#alerts li")
            # Drawn with the page, newest first, before any live alert.
            expect(items).to_have_count(3)
            expect(items.first).to_contain_text("history-3 gained tool")
            expect(dana.locator("#ws-status")).to_have_attribute("data-state", "open")
            publish("live-1")
            expect(items).to_have_count(4)
            expect(items.first).to_contain_text("live-1")

            # The server goes away; an alert happens while the browser is cut off.
            again = restart(live_server_process, stopped=lambda: publish("while-away"))
            expect(dana.locator("#ws-status")).to_have_attribute("data-state", "open",
                                                                 timeout=30_000)
            publish("after")
            expect(items.first).to_contain_text("after", timeout=15_000)
            ids = items.evaluate_all("items => items.map(i => Number(i.dataset.id))")
            # Every alert once, newest first, though catch-up re-sent the recent ones.
            assert ids == sorted(AlertEvent.objects.values_list("pk", flat=True),
                                 reverse=True), ids
            assert items.count() == 6
            dana.screenshot(path=str(ARTIFACTS / "overview-reconnected.png"), full_page=True)
        finally:
            browser.browser.close()
            if again is not None:
                again.send_signal(signal.SIGTERM)
                try:
                    again.wait(timeout=15)
                finally:  # a server that did not end is not left on the test database
                    again.kill()
    # While the server was away the browser said so (its socket, a refresh of the counters);
    # nothing else went wrong.
    assert [p for p in browser.problems
            if "WebSocket" not in p and "ERR_CONNECTION_REFUSED" not in p] == []
