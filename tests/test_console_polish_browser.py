"""The console's own pages in Chromium, as the demo serves them (DEBUG on): a mistyped address
gets the product's "Page not found" with a way back, never Django's list of every URL."""

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User

from tests.conftest import PASSWORD
from tests.test_dashboard_browser import Browser

pytestmark = pytest.mark.browser


@pytest.fixture
def signed_in(people, live_server_process, monkeypatch):
    """A Browser on the live server (started, like the demo, with DEBUG on)."""
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    hasher = PBKDF2PasswordHasher()
    User.objects.update(password=hasher.encode(PASSWORD, hasher.salt()))
    with sync_playwright() as playwright:
        yield Browser(playwright, live_server_process.url)


def test_a_mistyped_address_shows_the_consoles_page_not_found_with_a_way_back(signed_in):
    from playwright.sync_api import expect

    dana = signed_in.page("dana")
    response = dana.goto(f"{signed_in.base}/agents/no-such-agent/oops/")
    assert response.status == 404
    expect(dana.get_by_role("heading", name="Page not found")).to_be_visible()
    read = dana.locator("body").inner_text()
    assert "/agents/no-such-agent/oops/" in read
    assert "URLconf" not in read and "DEBUG = True" not in read and "api/v1/" not in read
    dana.get_by_role("link", name="the agents").click()
    expect(dana.get_by_role("heading", name="Agents", exact=False).first).to_be_visible()
    assert dana.url.endswith("/agents/")

    # Signed out, the same page (no URL list either), and the API still answers in JSON.
    stranger = signed_in.browser.new_context().new_page()
    stranger.goto(f"{signed_in.base}/no-such-page/")
    expect(stranger.get_by_role("heading", name="Page not found")).to_be_visible()
    assert "URLconf" not in stranger.locator("body").inner_text()
    api = stranger.request.get(f"{signed_in.base}/api/v1/no-such-thing")
    assert api.status == 404 and api.json()["error"]["code"] in ("not_found", "unauthenticated")
