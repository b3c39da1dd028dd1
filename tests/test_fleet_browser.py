"""The fleet page and the toxic combinations page in Chromium against the real ASGI server:
dana declares a toxic pair in the form and sees the path the approved fleet already has once
a worker has refreshed the snapshot the page reads (the page reloads itself), and the fleet
page draws its trend and silence charts from the local plotly.js with no request leaving the
machine, no console error and no CSP violation."""

import pytest

from registry.models import ToxicCombination
from tests.conftest import approved_agent
from tests.test_dashboard_browser import Browser, browser_passwords
from tests.test_demo import ARTIFACTS

pytestmark = pytest.mark.browser


def test_dana_declares_a_toxic_pair_and_reads_the_fleet_page(people, live_server_process,
                                                            start_worker, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    approved_agent(people, "support", data=[{"resource": "customers_db", "access": "read"}],
                   delegates_to=["mailer"])
    approved_agent(people, "mailer", tools=["email.send_external"])
    start_worker("default")  # it refreshes the fleet snapshot the pages read
    with sync_playwright() as playwright:
        browser = Browser(playwright, live_server_process.url)
        dana = browser.page("dana")
        dana.goto(f"{live_server_process.url}/toxic/")
        dana.fill("#id_name", "customers-never-email")
        dana.fill("#id_left", "data:customers_db:read")
        dana.fill("#id_right", "tool:email.send_external")
        dana.select_option("#id_effect", "deny")
        dana.click("form.toxic-form button[type=submit]")
        # the page says the workers are refreshing what it shows and reloads once they have
        expect(dana.locator(".toxic-paths li").first).to_contain_text(
            "support (can read customers_db) -> mailer (can use email.send_external)",
            timeout=60_000)
        assert ToxicCombination.objects.filter(name="customers-never-email").exists()
        dana.goto(f"{live_server_process.url}/fleet/")
        row = dana.locator('tr[data-rule="customers-never-email"]')
        expect(row.locator(".violations summary")).to_have_text("✖ 2 agents")
        row.locator(".violations summary").click()
        expect(row.locator(".violations li")).to_have_text(["mailer", "support"])
        expect(dana.locator("#chart-fleet-trend .main-svg").first).to_be_attached()
        expect(dana.locator("#chart-fleet-silence .main-svg").first).to_be_attached()
        ARTIFACTS.mkdir(exist_ok=True)
        dana.screenshot(path=str(ARTIFACTS / "fleet.png"), full_page=True)
        browser.browser.close()
    assert browser.problems == []
