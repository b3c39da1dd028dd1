"""The console's own pages in Chromium, as the demo serves them (DEBUG on): a mistyped address
gets the product's "Page not found" with a way back, never Django's list of every URL; two-factor
enrolment shows a QR code an authenticator app's camera reads; a dark system gets a dark, readable
console; on a phone the inbox keeps each item's time left in sight."""

import re
import struct
import zlib
from base64 import b32decode

import pytest
from django.contrib.auth.models import User

from tests.conftest import PASSWORD, approved_agent
from tests.registry.test_stepup import totp
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser


def grey_pixels(png: bytes) -> memoryview:
    """An 8-bit RGB(A) PNG, as Chromium's screenshots are, as a height x width grey buffer."""
    pos, data, header = 8, [], None
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, body = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            data.append(body)
        pos += 12 + length
    width, height, depth, colour = header[:4]
    assert depth == 8 and colour in (2, 6) and header[6] == 0, header
    channels = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(data)), width * channels
    grey, previous = bytearray(), bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            guess = {0: 0, 1: left, 2: up, 3: (left + up) // 2}.get(kind)
            if guess is None:  # Paeth
                p = left + up - corner
                near = min((abs(p - left), 0), (abs(p - up), 1), (abs(p - corner), 2))[1]
                guess = (left, up, corner)[near]
            line[x] = (line[x] + guess) & 255
        grey.extend((line[i] * 299 + line[i + 1] * 587 + line[i + 2] * 114) // 1000
                    for i in range(0, stride, channels))
        previous = line
    return memoryview(bytes(grey)).cast("B", (height, width))


@pytest.fixture
def signed_in(people, live_server_process, monkeypatch):
    """A Browser on the live server (started, like the demo, with DEBUG on)."""
    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
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


def test_two_factor_enrolment_shows_a_qr_code_the_app_reads_and_the_key_as_text(signed_in):
    import zxingcpp
    from playwright.sync_api import expect

    bob = signed_in.page("bob")
    bob.goto(f"{signed_in.base}/account/two-factor/")
    bob.get_by_role("button", name="Enrol an authenticator").click()
    code = bob.get_by_role("img", name="QR code of the key")
    expect(code).to_be_visible()
    # What a phone's camera sees: the code as Chromium draws it, read by a QR decoder.
    (found,) = zxingcpp.read_barcodes(grey_pixels(code.screenshot()))
    assert found.format == zxingcpp.BarcodeFormat.QRCode
    assert found.text.startswith("otpauth://totp/") and found.text == bob.locator(
        "#totp-uri").inner_text().strip()
    secret = bob.locator("#totp-secret").inner_text().strip()
    assert f"secret={secret}" in found.text and len(b32decode(secret)) >= 20
    assert signed_in.problems == []

# Luminance and WCAG contrast of computed colours, as the browser resolves them.
COLOURS = """(selectors) => {
  const rgb = (text) => text.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((c) => {
    c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  }).reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
  const contrast = (a, b) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  const out = {};
  for (const [name, [textSel, backSel]] of Object.entries(selectors)) {
    if (!document.querySelector(textSel)) throw new Error(`nothing reads ${textSel}`);
    const text = lum(rgb(getComputedStyle(document.querySelector(textSel)).color));
    const back = lum(rgb(getComputedStyle(document.querySelector(backSel)).backgroundColor));
    out[name] = {background: back, contrast: contrast(text, back)};
  }
  return out;
}"""
MESSAGES = {"page": ["body", "body"], "error mark": [".message-error strong", ".message-error"],
            "error": [".message-error", ".message-error"]}
AGENTS = {"link": ["main td a", "main table"], "health": ["main td .health", "main table"],
          "sync": ["main td .sync", "main table"]}
DONE = {"success mark": [".message-success strong", ".message-success"],
        "success": [".message-success", ".message-success"]}


def sign_in(context, base: str, username: str):
    page = context.new_page()
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return page


def test_a_person_whose_system_is_dark_gets_a_dark_console_that_stays_readable(people, signed_in):
    from playwright.sync_api import expect

    approved_agent(people, "refund-agent")
    base, readings = signed_in.base, {}
    for scheme in ("dark", "light"):
        User.objects.filter(username="bob").first().totpdevice_set.all().delete()
        bob = sign_in(signed_in.browser.new_context(color_scheme=scheme), base, "bob")
        bob.goto(f"{base}/account/two-factor/")
        bob.get_by_role("button", name="Enrol an authenticator").click()
        bob.fill("#enrol-code", "000000")
        bob.click("#confirm-enrolment")
        expect(bob.get_by_role("alert")).to_contain_text("Not done")
        # A click waits for the answer, not for its stylesheet: read colours once it is applied.
        bob.wait_for_load_state("load")
        reading = bob.evaluate(COLOURS, MESSAGES)
        secret = b32decode(bob.locator("#totp-secret").inner_text().strip())
        bob.fill("#enrol-code", totp(secret))
        bob.click("#confirm-enrolment")
        expect(bob.get_by_role("status")).to_contain_text("Done")
        bob.wait_for_load_state("load")
        reading.update(bob.evaluate(COLOURS, DONE))
        bob.goto(f"{base}/agents/")
        expect(bob.get_by_role("link", name="refund-agent")).to_be_visible()
        bob.wait_for_load_state("load")
        reading.update(bob.evaluate(COLOURS, AGENTS))
        readings[scheme] = reading
    dark, light = readings["dark"], readings["light"]
    assert dark["page"]["background"] < 0.02, dark  # near black, as the person's system asks
    assert light["page"]["background"] > 0.9, light  # the light console is unchanged
    for scheme, reading in readings.items():
        for name, colours in reading.items():
            assert colours["contrast"] >= 4.5, (scheme, name, colours)


def test_on_a_phone_the_inbox_shows_each_items_time_left_beside_its_agent(people, signed_in):
    from playwright.sync_api import expect

    from runtime import actions as runtime_actions

    agent = approved_agent(people, "refund-agent")
    runtime_actions.request_decision(agent, {
        "tool": "payments.refund", "wait_seconds": 600,
        "arguments": {"amount": "640", "order_id": "A-1001", "reason": "parcel lost"}},
        actor=people.alice)
    bob = signed_in.page("bob", width=390)
    bob.goto(f"{signed_in.base}/inbox/")
    row = bob.locator("tr.inbox-item[data-kind=decision]")
    row.get_by_role("link", name="refund-agent").scroll_into_view_if_needed()
    left = row.locator(".left")
    expect(left).to_have_text(re.compile(r"^\d+ min left$"))
    expect(left).to_be_in_viewport(ratio=1)  # read without scrolling the table sideways
    expect(row.get_by_text("asks to run payments.refund")).to_be_in_viewport()
    # Sorting by urgency stays one tap away.
    expect(bob.get_by_role("link", name="Urgency")).to_be_in_viewport()
    assert bob.evaluate("document.documentElement.scrollWidth") <= 390


def test_a_confirmation_that_could_not_be_sent_shows_on_the_persons_notifications_page(
        people, transactional_db, monkeypatch):
    from playwright.sync_api import expect

    from config import embedded_redis
    from tests.conftest import start_daphne, stop_daphne, sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    # A mail server that is not there, as in a demo without SMTP.
    server = start_daphne(EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(embedded_redis.free_port()),
                          EMAIL_TIMEOUT="2")
    try:
        with sync_playwright() as playwright:
            alice = Browser(playwright, server.url).page("alice")
            alice.goto(f"{server.url}/account/notifications/")
            expect(alice.locator("#failed-deliveries")).to_have_count(0)
            alice.fill("#target", "alice@example.org")
            alice.get_by_role("button", name="Add").click()
            expect(alice.locator(".message-warning")).to_contain_text(
                "Saved, but the confirmation could not be sent to that address")
            expect(alice.locator(".message-success")).to_have_count(0)
            failed = alice.get_by_role("alert", name="Not delivered")
            expect(failed).to_contain_text(
                "the confirmation link to alice@example.org failed (ConnectionRefusedError")
    finally:
        stop_daphne(server)


def test_the_demos_mail_sink_shows_compliance_what_was_sent(people, transactional_db, tmp_path,
                                                            monkeypatch):
    from playwright.sync_api import expect

    from tests.conftest import start_daphne, stop_daphne, sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    server = start_daphne(EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
                          EMAIL_FILE_PATH=str(tmp_path / "mail"))
    try:
        with sync_playwright() as playwright:
            browser = Browser(playwright, server.url)
            alice = browser.page("alice")
            alice.goto(f"{server.url}/account/notifications/")
            alice.fill("#target", "alice@example.org")
            alice.get_by_role("button", name="Add").click()
            expect(alice.get_by_role("status")).to_contain_text("Saved")
            expect(alice.locator("#failed-deliveries")).to_have_count(0)
            assert alice.goto(f"{server.url}/mail/").status == 403  # not for owners

            dana = browser.page("dana")
            dana.goto(f"{server.url}/mail/")
            sent = dana.locator("article.mail")
            expect(sent).to_have_count(1)
            expect(sent.get_by_role("heading")).to_have_text(
                "[agent-governance] confirm this notification address")
            assert "To\talice@example.org" in sent.inner_text().replace("\n", "\t")
            expect(sent).to_contain_text("If that was you, confirm it: ")
            expect(sent).to_contain_text("/account/notifications/")
    finally:
        stop_daphne(server)


def test_without_the_file_backend_there_is_no_mail_page(people, client, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    client.force_login(people.dana)
    assert client.get("/mail/").status_code == 404
