"""Dana's job in a real browser against the real ASGI server, a real RQ worker and real Redis:
she watches an agent's page turn "corrected" without a reload, reads its compliance timeline,
and exports and verifies the audit trail from the audit explorer. Screenshots go to
artifacts/."""

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from registry.models import Agent
from tests.conftest import approved_agent, eventually
from tests.test_dashboard_browser import Browser, browser_passwords
from tests.test_demo import ARTIFACTS

pytestmark = pytest.mark.browser


def test_dana_watches_a_correction_reads_the_timeline_and_verifies_the_trail(
        people, live_server_process, start_worker, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    worker = start_worker("reconcile", "ingest", "default")
    # A worker's start and first pass on a loaded 2-core CI machine can take minutes.
    eventually(lambda: Agent.objects.filter(status__health="in_policy").count() == 1,
               timeout=240, message=lambda: f"never converged; worker said:\n{worker.output()}")
    ARTIFACTS.mkdir(exist_ok=True)
    base = live_server_process.url
    with sync_playwright() as playwright:
        browser = Browser(playwright, base)
        try:
            dana = browser.page("dana")
            dana.goto(f"{base}/agents/refund-agent/")
            expect(dana.locator("#agent-health")).to_have_attribute("data-health", "in_policy")
            expect(dana.locator("#agent-live-state")).to_have_attribute("data-state", "open")
            dana.evaluate("window.stillTheSamePage = true")

            lab = browser.page("dana")  # another session injects the drift
            lab.goto(f"{base}/lab/")
            lab.select_option("#lab-agent", "refund-agent")
            lab.click("button[value=drift]")
            expect(lab.locator(".messages")).to_contain_text("bad deployment")

            live = dana.locator("#agent-live")
            # One line for the bad deployment's incident, naming all three of its findings.
            expect(live.locator("li[data-event='drift.detected']").first).to_contain_text(
                re.compile(r"refund-agent .*\(3 in this incident\)"), timeout=20_000)
            expect(live.locator("li[data-event='drift.corrected']").first).to_contain_text(
                "corrected and verified", timeout=20_000)
            expect(dana.locator("#agent-summary")).to_have_attribute(
                "data-refreshed", re.compile(r"\d+"), timeout=15_000)
            expect(dana.locator("#agent-health")).to_have_attribute(
                "data-health", "in_policy", timeout=15_000)
            expect(dana.locator("#open-findings")).to_have_attribute("data-count", "0")
            expect(live.locator("li[data-event='drift.detected']")).to_have_count(1)
            assert dana.evaluate("window.stillTheSamePage") is True  # never reloaded
            dana.screenshot(path=str(ARTIFACTS / "agent-corrected-live.png"), full_page=True)

            # The timeline: a drawn chart on a time axis; for an agent older than a week, 7 d
            # is a different span from 24 h (a younger one's chart is its life, either way).
            Agent.objects.filter(name="refund-agent").update(
                created_at=timezone.now() - timedelta(days=30))
            dana.goto(f"{base}/agents/refund-agent/#timeline")
            chart = dana.locator("#timeline-chart")
            expect(chart).to_have_attribute("data-drawn", "true")
            day = chart.locator(".xtick text").all_text_contents()
            dana.goto(f"{base}/agents/refund-agent/?timeline=7d#timeline")
            expect(chart).to_have_attribute("data-drawn", "true")
            week = chart.locator(".xtick text").all_text_contents()
            assert day and week and day != week
            box = chart.locator(".bars .point path").last.bounding_box()
            dana.mouse.move(box["x"] + box["width"] - 5, box["y"] + box["height"] / 2)
            expect(dana.locator(".hoverlayer")).to_contain_text("refund-agent")
            dana.screenshot(path=str(ARTIFACTS / "agent-timeline.png"), full_page=True)

            # Verify, then export, from the audit explorer.
            dana.goto(f"{base}/audit/")
            dana.click("#verify-trail")
            result = dana.locator("#verify-result")
            expect(result).to_have_attribute("data-ok", "true")
            expect(result).to_contain_text("Range proven")
            dana.screenshot(path=str(ARTIFACTS / "audit-verified.png"), full_page=True)
            dana.goto(f"{base}/audit/")
            with dana.expect_download() as download:
                dana.click("#export-trail")
            lines = [json.loads(line) for line in
                     open(download.value.path(), encoding="utf-8").read().splitlines()]
            assert lines[0]["format"] == "agentgov-audit-export/v1"
            assert any(line.get("entry", {}).get("action") == "finding.corrected"
                       for line in lines)
        finally:
            browser.browser.close()
    assert browser.problems == [], "\n".join(browser.problems)
