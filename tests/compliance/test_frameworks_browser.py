"""Dana's framework evidence in a real browser against the real ASGI server: she picks the EU
AI Act for the refund agent, reads each control's colour and the entries behind it, follows
one to the audit trail, downloads the signed bundle (which verifies), and adds a control of
her own. A screenshot goes to artifacts/."""

import json

import pytest
from agentgov.evidence import verify_report

from audit import keys
from tests.audit.conftest import key_file  # noqa: F401 (the server signs with the test's key)
from tests.compliance.test_framework_evidence import history  # noqa: F401
from tests.test_dashboard_browser import Browser, browser_passwords
from tests.test_demo import ARTIFACTS

pytestmark = pytest.mark.browser


def test_dana_reads_a_framework_report_downloads_its_bundle_and_adds_a_control(
        history, live_server_process, monkeypatch):  # noqa: F811
    from agentgov.audit import KeyRing
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    ARTIFACTS.mkdir(exist_ok=True)
    base = live_server_process.url
    with sync_playwright() as playwright:
        browser = Browser(playwright, base)
        try:
            dana = browser.page("dana")
            dana.click("nav >> text=Frameworks")
            dana.select_option("#fw-framework", "eu-ai-act")
            dana.fill("#fw-agent", "refund-agent")
            dana.click("#report-form button[type=submit]")
            counts = dana.locator("#report-counts")
            expect(counts).to_contain_text("4 green, 2 amber, 0 red")
            expect(dana.locator("tr[data-control='art-12']")).to_have_attribute(
                "data-colour", "green")
            oversight = dana.locator("tr[data-control='art-14']")
            expect(oversight).to_have_attribute("data-colour", "amber")
            decisions = oversight.locator("details[data-query='decisions_signed_off']")
            expect(decisions).to_have_attribute("data-status", "partial")
            decisions.locator("summary").click()
            expect(decisions.locator("li.item-missed")).to_contain_text("expired unanswered")
            expect(decisions.locator("li.item-met")).to_contain_text("allow by carol")
            dana.screenshot(path=str(ARTIFACTS / "framework-report.png"), full_page=True)

            with dana.expect_download() as download:
                dana.click("#report-bundle")
            document = json.loads(open(download.value.path(), encoding="utf-8").read())
            assert document["format"] == "agentgov-framework-report/v1"
            assert document["report"]["counts"] == {"green": 4, "amber": 2, "red": 0}
            check = verify_report(document, KeyRing(*keys.trusted()))
            assert check.ok, check.message

            # The evidence link opens the audit trail at the entry carol signed.
            decisions.locator("li.item-met a").last.click()
            expect(dana.locator("table")).to_contain_text("decision.decided")

            dana.goto(f"{base}/frameworks/?framework=eu-ai-act&agent=refund-agent")
            dana.fill("#ctl-id", "ours-1")
            dana.fill("#ctl-title", "Every agent is reviewed on time")
            dana.check("input[name=queries][value=recertifications_on_time]")
            dana.fill("#ctl-reason", "the board asked for it")
            dana.click("#control-form button[type=submit]")
            expect(dana.locator(".messages")).to_contain_text("saved as version 1")
            expect(dana.locator("tr[data-control='ours-1']")).to_have_attribute(
                "data-colour", "green")
            expect(dana.locator("tr[data-control='ours-1']")).to_contain_text("custom v1")
        finally:
            browser.browser.close()
    assert browser.problems == [], "\n".join(browser.problems)
