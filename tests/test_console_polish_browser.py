"""The console's own pages in Chromium, as the demo serves them (DEBUG on): a mistyped address
gets the product's "Page not found" with a way back, never Django's list of every URL; two-factor
enrolment shows a QR code an authenticator app's camera reads."""

import struct
import zlib
from base64 import b32decode

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User

from tests.conftest import PASSWORD
from tests.test_dashboard_browser import Browser

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
