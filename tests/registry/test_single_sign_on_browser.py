"""Single sign-on in a real browser against the real ASGI server and a local OpenID Connect
provider: erin clicks "Sign in with Example SSO", lands signed in with the role her groups map
to, and after the provider drops her from the approvers group her next sign-in takes it away."""

import re

import pytest

from audit.choices import AuditAction
from audit.models import AuditEntry
from tests.conftest import start_daphne, stop_daphne
from tests.oidc_provider import CLIENT_ID, CLIENT_SECRET, LocalProvider, Person
from tests.test_demo import CHROMIUM_ARGS, watch_for_csp_violations

pytestmark = pytest.mark.browser

ERIN = dict(sub="idp-erin-42", preferred_username="erin", email="erin@corp.example")


def sso_page(browser, base: str, problems: list[str]):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("response", lambda r: problems.append(f"{r.status} {r.url}")
            if r.status >= 400 else None)
    page.on("request", lambda r: None if r.url.startswith("http://127.0.0.1")
            else problems.append(f"left the machine: {r.url}"))
    watch_for_csp_violations(page, problems)
    page.goto(f"{base}/login/")
    page.get_by_role("link", name="Sign in with Example SSO").click()
    page.wait_for_url(re.compile(r"127\.0\.0\.1:\d+/$"))
    return page


def test_erin_signs_in_through_the_provider_and_her_groups_decide_her_role(
        transactional_db, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with LocalProvider(redirect_uris=[]) as provider:
        server = start_daphne(
            OIDC_CLIENT_ID=CLIENT_ID, OIDC_CLIENT_SECRET=CLIENT_SECRET,
            OIDC_ISSUER=provider.issuer, OIDC_PROVIDER_NAME="Example SSO",
            OIDC_ROLE_MAP="agentgov-approvers=approver,agentgov-compliance=compliance")
        try:
            provider.redirect_uris = [f"{server.url}/sso/callback/"]
            problems: list[str] = []
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                                     args=CHROMIUM_ARGS)
                provider.person = Person(**ERIN, groups=["agentgov-approvers", "staff"])
                erin = sso_page(browser, server.url, problems)
                expect(erin.locator("header")).to_contain_text("erin · approver")
                erin.goto(f"{server.url}/inbox/")
                expect(erin.locator("h1")).to_contain_text("Inbox")

                provider.person = Person(**ERIN, groups=["staff"])
                again = sso_page(browser, server.url, problems)
                expect(again.locator("header")).to_contain_text("erin")
                expect(again.locator("header")).not_to_contain_text("approver")
                assert problems == []
                inbox = again.goto(f"{server.url}/inbox/")
                assert inbox is not None and inbox.status == 403
                browser.close()
        finally:
            stop_daphne(server)
    assert all("403" in problem for problem in problems), problems  # the refused inbox only
    granted = AuditEntry.objects.get(action=AuditAction.ROLE_GRANTED, target="user:erin")
    revoked = AuditEntry.objects.get(action=AuditAction.ROLE_REVOKED, target="user:erin")
    assert granted.actor == revoked.actor == f"sso:{provider.issuer}"
    assert revoked.before == {"roles": ["approver"]} and revoked.after == {"roles": []}
