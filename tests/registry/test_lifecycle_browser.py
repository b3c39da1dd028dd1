"""An approval's lifecycle through the pages, in a real browser against the real ASGI server."""

import re

import pytest

from registry.models import Agent
from tests.registry.test_rollback import at_generation_two
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser


def test_alice_rolls_back_from_the_agent_page_and_bob_approves_the_shown_diff(
        people, shared_server_process, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    at_generation_two(people)
    with sync_playwright() as playwright:
        browser = Browser(playwright, shared_server_process.url)
        alice = browser.page("alice")
        alice.goto(f"{shared_server_process.url}/agents/refund-agent/")
        expect(alice.locator("#rollback-2")).to_have_count(0)  # the active one has no button
        alice.click("#rollback-1")
        expect(alice.locator(".messages")).to_contain_text("back to generation 1")
        expect(alice.locator("main")).to_contain_text("roll back to generation 1")
        expect(alice.locator("main")).to_contain_text("2000")  # the diff from generation 2
        proposal_url = alice.url

        bob = browser.page("bob")
        bob.goto(proposal_url)
        bob.get_by_role("button", name="Approve").click()
        expect(bob.locator(".messages")).to_contain_text("generation 3")
        bob.goto(f"{shared_server_process.url}/agents/refund-agent/")
        expect(bob.locator("main")).to_contain_text("rollback.proposed")
        expect(bob.locator("#rollback-1")).to_have_count(0)  # bob does not own the agent
        browser.browser.close()
    agent = Agent.objects.get(name="refund-agent")
    assert agent.generation == 3
    assert agent.active_version.spec == agent.versions.get(generation=1).spec
    assert browser.problems == []





def test_a_grant_counted_from_approval_is_written_shown_and_started_through_the_pages(
        people, shared_server_process, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright
    from tests.registry.test_grants_from_approval import CRM, manifest_with

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    with sync_playwright() as playwright:
        browser = Browser(playwright, shared_server_process.url)
        alice = browser.page("alice")
        alice.goto(f"{shared_server_process.url}/manifests/new")
        alice.fill("#manifest", manifest_with({**CRM, "duration": "2h", "starts": "approval"}))
        alice.get_by_role("button", name="Apply").click()
        expect(alice.locator("main")).to_contain_text("+ grant crm read for 2h from approval")
        version = Agent.objects.get(name="refund-agent").versions.get()

        bob = browser.page("bob")
        bob.goto(f"{shared_server_process.url}/proposals/{version.pk}/")
        expect(bob.locator("main")).to_contain_text("for 2h from approval")
        bob.get_by_role("button", name="Approve").click()
        expect(bob.locator(".messages")).to_contain_text("generation 1")
        version.refresh_from_db()
        (grant,) = version.spec["grants"]
        bob.goto(f"{shared_server_process.url}/agents/refund-agent/")
        expect(bob.locator("main")).to_contain_text(grant["expires_at"])
        expect(bob.locator("main")).to_contain_text("grant.started")
        browser.browser.close()
    assert browser.problems == []


def test_bob_grants_a_waiver_on_the_agent_page_which_shows_it_with_its_end(
        people, shared_server_process, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import approved_agent, sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    agent = approved_agent(people, "refund-agent")
    with sync_playwright() as playwright:
        browser = Browser(playwright, shared_server_process.url)
        bob = browser.page("bob")
        bob.goto(f"{shared_server_process.url}/agents/refund-agent/")
        bob.fill("#waiver-pointer", "/tools/crm.search")
        bob.fill("#waiver-reason", "CRM lookups during the migration")
        bob.fill("#waiver-ticket", "CHG-1234")
        bob.fill("#waiver-duration", "8h")
        bob.get_by_role("button", name="Grant waiver").click()
        expect(bob.locator(".messages")).to_contain_text("Waived /tools/crm.search")
        waiver = agent.waivers.get()
        listed = bob.locator(f"#waiver-{waiver.pk}")
        # Its end in words ("in 7 hours"), the exact time on hover.
        expect(listed).to_contain_text(re.compile(r"expiring\s+in\s+[78]\s+hours"))
        expect(listed.locator("time")).to_have_attribute(
            "title", f"{waiver.expires_at:%Y-%m-%d %H:%M:%S} UTC")
        expect(listed).to_contain_text("CHG-1234")
        expect(bob.locator("main")).to_contain_text("waiver.granted")

        alice = browser.page("alice")  # the owner sees it and cannot grant one herself
        alice.goto(f"{shared_server_process.url}/agents/refund-agent/")
        expect(alice.locator(f"#waiver-{waiver.pk}")).to_contain_text("/tools/crm.search")
        expect(alice.locator("#waiver-pointer")).to_have_count(0)
        browser.browser.close()
    assert (waiver.granted_by, waiver.ticket) == (people.bob, "CHG-1234")
    assert browser.problems == []


def test_alice_proposes_retiring_her_agent_and_bob_approves_it_on_the_agent_page(
        people, shared_server_process, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import approved_agent, sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    approved_agent(people, "refund-agent")
    with sync_playwright() as playwright:
        browser = Browser(playwright, shared_server_process.url)
        alice = browser.page("alice")
        alice.goto(f"{shared_server_process.url}/agents/refund-agent/")
        alice.fill("#retire-reason", "replaced by refunds-v2")
        alice.get_by_role("button", name="Propose retirement").click()
        expect(alice.locator(".messages")).to_contain_text("Proposed retiring refund-agent")
        expect(alice.locator("#retirement-pending")).to_contain_text("replaced by refunds-v2")
        expect(alice.locator("#approve-retirement")).to_have_count(0)  # four eyes

        bob = browser.page("bob")
        bob.goto(f"{shared_server_process.url}/agents/refund-agent/")
        bob.click("#approve-retirement")
        expect(bob.locator(".messages")).to_contain_text("Retired refund-agent")
        expect(bob.locator("main")).to_contain_text("Retired: its tokens are revoked")
        expect(bob.locator("main")).to_contain_text("agent.retired")
        expect(bob.locator("main")).to_contain_text("Version history")  # history stays
        browser.browser.close()
    assert Agent.objects.get(name="refund-agent").lifecycle == "retired"
    assert browser.problems == []
