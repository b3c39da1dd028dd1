"""The Python client's TLS: one verifying context per process (its CA bundle is loaded once,
not per client), which still refuses a certificate nobody vouched for and honours
SSL_CERT_FILE."""

import http.server
import ipaddress
import json
import ssl
import threading

import httpx
import pytest
from agentgov import client as client_module
from agentgov.client import Client
from agentgov.errors import Unreachable
from cryptography import x509

from tests.certificates import self_signed


class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        body = json.dumps({"agent": "refund-agent", "generation": 1, "spec": {},
                           "running": True, "sha256": "0" * 64}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def https_server(tmp_path):
    """A local HTTPS server whose certificate is self-signed for 127.0.0.1."""
    cert, key = self_signed(tmp_path, "127.0.0.1", x509.IPAddress(ipaddress.ip_address(
        "127.0.0.1")))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}", cert
    server.shutdown()
    server.server_close()


@pytest.fixture
def fresh_contexts(monkeypatch):
    """The process's contexts forgotten, and every one made counted."""
    made = []
    create = httpx.create_ssl_context
    monkeypatch.setattr(client_module, "_tls_contexts", {})
    monkeypatch.setattr(httpx, "create_ssl_context", lambda: made.append(1) or create())
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    return made


def test_clients_share_one_verifying_context(fresh_contexts):
    clients = [Client("http://127.0.0.1:1", "token") for _ in range(5)]
    assert len(fresh_contexts) == 1
    for each in clients:
        each.close(timeout=0)


def test_the_shared_context_refuses_a_certificate_nobody_vouched_for(https_server,
                                                                    fresh_contexts,
                                                                    monkeypatch):
    url, cert = https_server
    with Client(url, "token", retry=client_module.RetryPolicy(attempts=1)) as refused, \
            pytest.raises(Unreachable, match="CERTIFICATE_VERIFY_FAILED"):
        refused.desired_state("refund-agent")
    # Trusting the server's certificate through SSL_CERT_FILE is a context of its own.
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with Client(url, "token") as trusting:
        assert trusting.desired_state("refund-agent").generation == 1
    assert len(fresh_contexts) == 2
