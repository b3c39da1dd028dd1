"""Step-up through the pages, in a real browser against the real ASGI server: bob enrols an
authenticator on his own page and approves a proposal a guardrail marks for step-up."""

import time
from base64 import b32decode

import pytest

from audit.models import AuditEntry
from registry import actions
from registry.models import DesiredStateVersion
from tests.conftest import approved_agent, refund_manifest
from tests.registry.test_stepup import totp
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser


def test_bob_enrols_an_authenticator_and_approves_a_marked_proposal_with_its_code(
        people, live_server_process, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    agent = approved_agent(people, "refund-agent")
    actions.create_guardrail(actor=people.dana, name="model-changes",
                             expression='spec.model == "gpt-4.1"', effect="step_up",
                             message="changing the model needs a second factor")
    version = actions.propose(agent, refund_manifest(model="gpt-5").spec,
                              agent.active_version.metadata, actor=people.alice,
                              source="api").version
    with sync_playwright() as playwright:
        browser = Browser(playwright, live_server_process.url)
        bob = browser.page("bob")
        bob.goto(f"{live_server_process.url}/proposals/{version.pk}/")
        expect(bob.locator("main")).to_contain_text("guardrail model-changes asks for step-up")
        bob.get_by_role("link", name="enrol one").click()
        expect(bob.locator("#not-enrolled")).to_be_visible()
        bob.click("#start-enrolment")
        expect(bob.locator("#totp-uri")).to_contain_text("otpauth://totp/")
        secret = b32decode(bob.locator("#totp-secret").inner_text().strip())
        bob.fill("#enrol-code", totp(secret, at=time.time() - 30))
        bob.click("#confirm-enrolment")
        expect(bob.locator("#enrolled")).to_be_visible()

        bob.goto(f"{live_server_process.url}/proposals/{version.pk}/")
        bob.get_by_role("button", name="Approve").click()
        expect(bob.locator(".messages")).to_contain_text("needs step-up")
        assert DesiredStateVersion.objects.get(pk=version.pk).state == "pending"
        bob.fill(f"#approve-otp-{version.pk}", totp(secret))
        bob.get_by_role("button", name="Approve").click()
        expect(bob.locator(".messages")).to_contain_text("generation 2")
        browser.browser.close()
    entry = AuditEntry.objects.get(action="proposal.approved", target=f"proposal:{version.pk}")
    assert entry.actor == "bob" and entry.after["step_up"]["method"] == "totp"
    assert browser.problems == []
