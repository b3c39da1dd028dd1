"""The health word tells the truth, read in Chromium against the real ASGI server: a retired
agent never reads "in policy" (its page, the agent list, the overview's count, the fleet's
compliance chart), and an agent's health never reads "in policy" beside a finding that is
open or being corrected (here, read while a real pass waits on its platform between
detecting the drift and correcting it)."""

import re
import threading

import pytest
from django.db import connection

from reconciliation import actions as reconciliation
from reconciliation.choices import OPEN_STATUSES
from reconciliation.models import Finding
from registry import actions
from registry.models import Agent
from sandbox import actions as sandbox_actions
from sandbox.connector import SandboxConnector
from tests.conftest import approved_agent, eventually
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser
HEALTH_OF = {"open": "drifted", "regressed": "drifted", "accepted": "drifted",
             "correcting": "correcting", "escalated": "escalated", "blocked": "drifted"}


def in_policy(*agents: Agent) -> None:
    for agent in agents:
        sandbox_actions.ensure_sandbox(agent)
        reconciliation.reconcile_agent(agent.pk, trigger="approved")
    assert set(Agent.objects.values_list("status__health", flat=True)) == {"in_policy"}


def test_a_retired_agent_never_reads_in_policy(people, shared_server_process, start_worker,
                                               monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    refund = approved_agent(people, "refund-agent")
    payouts = approved_agent(people, "payouts-agent")
    in_policy(refund, payouts)
    retirement = actions.propose_retirement("payouts-agent", actor=people.alice,
                                            reason="replaced by refund-agent")
    actions.approve_retirement(retirement.pk, actor=people.bob)
    start_worker("default")  # it refreshes the fleet snapshot the fleet page reads
    url = shared_server_process.url
    with sync_playwright() as playwright:
        browser = Browser(playwright, url)
        dana = browser.page("dana")
        expect(dana.locator('[data-health="in_policy"]')).to_have_text("1")  # the overview
        dana.goto(f"{url}/agents/payouts-agent/")
        expect(dana.locator("#agent-health")).to_have_text("∅ retired")
        expect(dana.locator(".timeline-list li").last).to_contain_text(
            "retired, no longer judged")
        dana.goto(f"{url}/agents/")
        expect(dana.locator('tr[data-agent="payouts-agent"] .health')).to_have_text("∅ retired")
        expect(dana.locator('tr[data-agent="refund-agent"] .health')).to_have_text(
            "✔ in policy")
        dana.goto(f"{url}/fleet/")
        chart = dana.locator("#chart-fleet-compliance")
        expect(chart.locator(".gtitle")).to_contain_text("Agents out of policy: 0 of 1",
                                                         timeout=60_000)
        expect(chart.locator(".ytick")).to_have_text(["refund-agent"])
        browser.browser.close()
    assert browser.problems == []


def test_the_health_word_agrees_with_the_open_findings_beside_it(people, shared_server_process,
                                                                monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    in_policy(agent)
    # The platform takes its time to apply the corrections: the pass has found the drift and
    # waits on the platform while alice reads the page.
    release, real_apply = threading.Event(), SandboxConnector.apply

    def slow_apply(self, *args, **kwargs):
        assert release.wait(120), "never released"
        return real_apply(self, *args, **kwargs)

    monkeypatch.setattr(SandboxConnector, "apply", slow_apply)
    from sandbox.lab import inject

    inject(agent, "drift", actor="dana")

    def the_pass() -> None:
        try:
            reconciliation.reconcile_agent(agent.pk, trigger="observation")
        finally:
            connection.close()

    worker = threading.Thread(target=the_pass, daemon=True)
    worker.start()
    try:
        eventually(lambda: Finding.objects.filter(agent=agent, status__in=OPEN_STATUSES).exists(),
                   message="the pass never found the drift")
        with sync_playwright() as playwright:
            browser = Browser(playwright, shared_server_process.url)
            alice = browser.page("alice")
            alice.goto(f"{shared_server_process.url}/agents/refund-agent/")
            listed = alice.locator("#open-findings li strong").all_inner_texts()
            assert listed, "the page lists no open finding"
            health = alice.locator("#agent-health").inner_text()
            assert "in policy" not in health, f"{health!r} beside findings {listed}"
            assert re.sub(r"^\W+", "", health) in {HEALTH_OF[status] for status in listed}, (
                health, listed)
            release.set()
            worker.join(timeout=120)
            # corrected and verified: the word and the list agree the other way round
            alice.reload()
            expect(alice.locator("#agent-health")).to_have_text("✔ in policy")
            expect(alice.locator("#open-findings")).to_have_text("✔ No open findings.")
            browser.browser.close()
        assert browser.problems == []
    finally:
        release.set()
        worker.join(timeout=120)
