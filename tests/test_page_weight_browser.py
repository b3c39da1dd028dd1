"""A cold overview (nothing cached) transfers under 1.5 MB and still draws its charts: the
console ships plotly's basic build, gzipped, not the 4.8 MB full one. In Chromium against the
real ASGI server."""

import pytest

from tests.conftest import approved_agent
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser
LIMIT = 1_500_000


def test_a_cold_overview_transfers_under_one_and_a_half_megabytes_and_draws_its_charts(
        people, live_server_process, monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    approved_agent(people, "refund-agent")
    browser_passwords()
    base = live_server_process.url
    with sync_playwright() as playwright:
        dana = Browser(playwright, base).page("dana")  # signed in: the sign-in page is cached
        cold = dana.context.browser.new_context(viewport={"width": 1280, "height": 900},
                                                storage_state=dana.context.storage_state())
        page = cold.new_page()
        received = []
        page.on("requestfinished", lambda request: received.append(request))
        page.goto(f"{base}/", wait_until="load")
        expect(page.locator("#chart-drift .main-svg").first).to_be_attached()
        expect(page.locator("#chart-response .main-svg").first).to_be_attached()
        sizes = {r.url: r.sizes()["responseBodySize"] + r.sizes()["responseHeadersSize"]
                 for r in received}
        total = sum(sizes.values())
        plotly = next(url for url in sizes if "plotly" in url)
        assert total < LIMIT, sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
        assert sizes[plotly] < 500_000  # gzipped on the wire
        # Cached for good under a URL that names its version: a later page does not ask again.
        request = next(r for r in received if r.url == plotly)
        assert "immutable" in request.response().headers["cache-control"]
        assert "4.1.1" in plotly
