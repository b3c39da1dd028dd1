"""The fleet page tells the truth, read by dana in Chromium against the real ASGI server: a
rule's agents are a count she can open, not a wall of names; a step-up or two-approver
guardrail the approved fleet was approved under is a requirement met, not a violation; group
rules and group budgets are listed with their effect; the toxic pair form's help shows its
placeholders."""

import pytest

from registry import actions
from runtime.actions.group_rules import create_group_rule
from tests.conftest import approved_agent
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser
AGENTS = 6


def test_dana_reads_counts_requirements_group_rules_and_budgets_on_the_fleet_page(
        people, shared_server_process, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    for i in range(AGENTS):
        approved_agent(people, f"payments-{i}")
    # every approved refund limit is above 100: each was approved with what these ask for
    for name, effect in (("big-refunds-step-up", "step_up"),
                         ("big-refunds-two-approvers", "require_approvals")):
        actions.create_guardrail(
            actor=people.dana, name=name, effect=effect, message="big refunds need more",
            expression="spec.actions['payments.refund'].max <= 100")
    actions.create_guardrail(actor=people.dana, name="deny-all", effect="deny",
                             message="nothing passes", expression="false")
    create_group_rule(actor=people.dana, name="refunds-per-hour", measure="amount", limit=5000,
                      per="1h", match={"action": "payments.refund"}, effect="escalate")
    create_group_rule(actor=people.dana, name="team-token-budget", measure="tokens",
                      limit=1_000_000, per="1d", effect="block")
    with sync_playwright() as playwright:
        browser = Browser(playwright, shared_server_process.url)
        dana = browser.page("dana")
        dana.goto(f"{shared_server_process.url}/fleet/")

        def row(name: str):
            return dana.locator(f'tr[data-rule="{name}"]')

        # a count she can open, not every name at once
        covers = row("deny-all").locator(".covers")
        expect(covers.locator("summary")).to_have_text(f"{AGENTS} agents")
        expect(covers.get_by_role("link", name="payments-3")).to_be_hidden()
        covers.locator("summary").click()
        expect(covers.get_by_role("link", name="payments-3")).to_be_visible()

        # requirements met by approval are not violations
        for name in ("big-refunds-step-up", "big-refunds-two-approvers"):
            violations = row(name).locator(".violations")
            expect(violations).to_contain_text("none")
            expect(violations).to_contain_text(
                f"requirement met by approval for {AGENTS} agents")
            expect(violations).not_to_contain_text("✖")
        expect(row("deny-all").locator(".violations summary")).to_have_text(
            f"✖ {AGENTS} agents")

        # group rules and budgets are there, with their effect
        expect(row("refunds-per-hour")).to_contain_text("group rule")
        expect(row("refunds-per-hour").locator(".effect")).to_have_text("escalate")
        expect(row("refunds-per-hour")).to_contain_text("amount at most 5000 per 1h")
        expect(row("team-token-budget")).to_contain_text("group budget")
        expect(row("team-token-budget").locator(".effect")).to_have_text("block")

        dana.goto(f"{shared_server_process.url}/toxic/")
        expect(dana.locator("form.toxic-form")).to_contain_text(
            "data:<resource>:<read|write|admin>")
        browser.browser.close()
    assert browser.problems == []


def test_dana_declares_a_group_budget_in_the_console_and_the_fleet_page_lists_it(
        people, shared_server_process, start_worker, monkeypatch):
    from playwright.sync_api import expect

    from runtime.models import GroupRule
    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    approved_agent(people, "payments-0")  # both of team payments
    approved_agent(people, "payments-1")
    start_worker("default")  # it refreshes the fleet snapshot the fleet page reads
    url = shared_server_process.url
    with sync_playwright() as playwright:
        browser = Browser(playwright, url)
        bob = browser.page("bob")  # an approver reads the rules, without the form
        bob.goto(f"{url}/group-rules/")
        expect(bob.locator("form.group-rule-form")).to_have_count(0)
        dana = browser.page("dana")
        dana.goto(f"{url}/fleet/")  # the snapshot exists before the rule does
        dana.goto(f"{url}/group-rules/")
        dana.fill("#id_name", "payments-daily-tokens")
        dana.fill("#id_team", "payments")
        dana.select_option("#id_measure", "tokens")
        dana.fill("#id_limit", "500000")
        dana.fill("#id_per", "1d")
        dana.select_option("#id_effect", "block")
        dana.click("form.group-rule-form button[type=submit]")
        expect(dana.locator(".messages")).to_contain_text(
            "Group rule payments-daily-tokens saved")
        expect(dana.locator("table.group-rules")).to_contain_text("payments-daily-tokens")
        rule = GroupRule.objects.get(name="payments-daily-tokens")
        assert (rule.selector, rule.measure, rule.effect) == ({"team": "payments"}, "tokens",
                                                              "block")
        dana.fill("#id_name", "bad-window")
        dana.select_option("#id_measure", "events")
        dana.fill("#id_limit", "10")
        dana.fill("#id_per", "forever")
        dana.click("form.group-rule-form button[type=submit]")
        expect(dana.locator("form.group-rule-form .errorlist")).to_be_visible()
        assert not GroupRule.objects.filter(name="bad-window").exists()

        dana.goto(f"{url}/fleet/")  # it reloads itself once the workers have refreshed it
        row = dana.locator('tr[data-rule="payments-daily-tokens"]')
        expect(row).to_contain_text("group budget", timeout=60_000)
        expect(row.locator(".effect")).to_have_text("block")
        expect(row.locator(".covers summary")).to_have_text("2 agents")
        browser.browser.close()
    # the refused form answered 400 (the response and Chromium's note of it): nothing else
    assert [p for p in browser.problems
            if not p.startswith("400 ") and "status of 400" not in p] == []
