"""The outbound guard as plain functions: which host, port and resolved address a request may
go to (the HTTP paths are in test_connector_attacks.py and test_behaviour_rules.py)."""

import pytest

from config import outbound
from config.env import SettingError, env_allow_list


@pytest.fixture
def dns(monkeypatch):
    answers: dict[str, list[str]] = {}
    monkeypatch.setattr(outbound, "resolve", lambda host, port: answers.get(host) or [host])
    return answers


@pytest.mark.parametrize("url, addresses, allowed", [
    ("https://p.platforms.example/", ["93.184.216.34"], True),
    ("https://p.platforms.example:8443/", ["93.184.216.34"], False),  # port not listed
    ("https://p.platforms.example/", ["93.184.216.34", "127.0.0.1"], False),  # one inside
    ("https://p.platforms.example/", ["169.254.169.254"], False),       # cloud metadata
    ("https://p.platforms.example/", ["10.1.2.3"], False),              # private, not named
    ("https://p.platforms.example/", ["10.9.0.5"], True),               # private, named
    ("https://p.platforms.example/", ["224.0.0.251"], False),           # multicast
    ("https://p.platforms.example/", ["100.64.0.1"], False),            # shared (CGNAT)
    ("https://p.platforms.example/", ["0.0.0.0"], False),
    ("https://p.platforms.example/", ["::ffff:127.0.0.1"], False),      # v4-mapped loopback
    ("https://p.platforms.example/", ["fe80::1"], False),
    ("http://127.0.0.1:8700/", ["127.0.0.1"], True),                    # named exactly
    ("http://127.0.0.1:8701/", ["127.0.0.1"], False),
    ("http://localhost:8700/", ["127.0.0.1"], False),                   # a name, not listed
    ("ftp://p.platforms.example/", ["93.184.216.34"], False),
    ("https://u:p@p.platforms.example/", ["93.184.216.34"], False),
])
def test_a_destination_is_allowed_only_by_name_port_and_resolved_address(
        dns, url, addresses, allowed):
    dns["p.platforms.example"] = addresses
    patterns = ["*.platforms.example", "127.0.0.1:8700", "10.9.0.0/16:443"]
    if allowed:
        destination = outbound.check(url, patterns)
        assert destination.address == addresses[0]  # the address checked is the one called
    else:
        with pytest.raises(outbound.Refused):
            outbound.check(url, patterns)


def test_a_name_that_does_not_resolve_is_refused(monkeypatch):
    def fail(host, port):
        raise OSError("Name or service not known")

    monkeypatch.setattr(outbound, "resolve", fail)
    with pytest.raises(outbound.Refused, match="does not resolve"):
        outbound.check("https://gone.platforms.example/", ["*.platforms.example"])


@pytest.mark.parametrize("entry", ["host:0", "host:99999", "host:http", "[::1", "a b", ":80"])
def test_a_bad_allow_list_entry_fails_at_start_up(monkeypatch, entry):
    monkeypatch.setenv("CONNECTOR_ALLOWED_HOSTS", f"ok.example:443,{entry}")
    with pytest.raises(SettingError, match="CONNECTOR_ALLOWED_HOSTS"):
        env_allow_list("CONNECTOR_ALLOWED_HOSTS")


@pytest.fixture
def tls_platform(tmp_path):
    """An https server on loopback with a certificate for platform.test only; it records the
    TLS server name (SNI) and the Host header each request came with."""
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from cryptography import x509

    from tests.certificates import self_signed

    cert_file, key_file = self_signed(tmp_path, "platform.test", x509.DNSName("platform.test"))
    seen: dict[str, list[str]] = {"sni": [], "host": []}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen["host"].append(self.headers["Host"])
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    context.sni_callback = lambda sock, server_name, ctx: seen["sni"].append(server_name)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], cert_file, seen
    server.shutdown()
    server.server_close()


def test_https_goes_to_the_checked_address_with_the_name_in_sni_and_the_certificate_checked(
        dns, tls_platform, monkeypatch):
    import ssl

    port, cert_file, seen = tls_platform
    dns["platform.test"] = ["127.0.0.1"]
    destination = outbound.check(f"https://platform.test:{port}/",
                                 [f"platform.test:{port}", f"127.0.0.1:{port}"])
    with pytest.raises(ssl.SSLCertVerificationError):  # not trusted here: refused, not ignored
        outbound.send(destination, "GET", "/agents/a/state", {})
    trusting = ssl.create_default_context(cafile=str(cert_file))
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: trusting)
    assert outbound.send(destination, "GET", "/agents/a/state", {}).body == b"{}"
    assert seen["sni"] == ["platform.test", "platform.test"]
    assert seen["host"] == [f"platform.test:{port}"]
    elsewhere = outbound.Destination("https", "other.test", port, "127.0.0.1", "/")
    with pytest.raises(ssl.SSLCertVerificationError):  # the certificate is checked by name
        outbound.send(elsewhere, "GET", "/", {})


def test_a_target_that_cannot_be_sent_fails_like_an_unreachable_platform():
    destination = outbound.Destination("http", "127.0.0.1", 9, "127.0.0.1", "/")
    with pytest.raises(OSError):  # never a UnicodeEncodeError escaping into a pass or a job
        outbound.send(destination, "GET", "/plätform/agents/a/state", {})
