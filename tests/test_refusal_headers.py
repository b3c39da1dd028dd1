"""The answers refused before any view (a body over the limit, a NUL in the URL) carry the same
security headers as every other answer: they were sent by middlewares that ran before the
security ones, so a console page refused with a 400 could be framed and sniffed. The 413 the
ASGI layer sends before Django (a body sized by its Content-Length or read whole in chunks)
carries them too."""

import socket
from urllib.parse import urlsplit

import pytest

HEADERS = ("X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy",
           "Cross-Origin-Opener-Policy", "Content-Security-Policy")


def assert_secured(headers) -> None:
    found = {name: headers.get(name) for name in HEADERS}
    assert all(found.values()), found
    assert found["X-Content-Type-Options"] == "nosniff"
    assert found["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in found["Content-Security-Policy"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/agents/refund%00agent", "/agents/refund%00agent/"])
def test_a_url_refused_for_its_nul_carries_the_security_headers(client, people, path):
    client.force_login(people.bob)
    answer = client.get(path)
    assert answer.status_code == 400
    assert_secured(answer.headers)


@pytest.mark.django_db
def test_a_body_refused_for_its_size_carries_the_security_headers(agent_client, settings):
    body = b"[" + b" " * settings.DATA_UPLOAD_MAX_MEMORY_SIZE + b"]"
    answer = agent_client.generic("POST", "/api/v1/events", body,
                                  content_type="application/json")
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "too_large"
    assert_secured(answer.headers)


def test_a_413_sent_before_django_carries_the_security_headers(shared_server_process,
                                                                settings):
    """Through the real ASGI server: a chunked body (no Content-Length) past the limit is
    refused by the ASGI layer in front of Django's middlewares, which reads it whole."""
    parts = urlsplit(shared_server_process.url)
    head = (f"POST /api/v1/events HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n").encode()
    chunk = b" " * 65536
    count = settings.DATA_UPLOAD_MAX_MEMORY_SIZE // len(chunk) + 2
    body = (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n") * count + b"0\r\n\r\n"
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as conn:
        conn.sendall(head + body)
        answer = b""
        while block := conn.recv(65536):
            answer += block
    status_line, *lines = answer.partition(b"\r\n\r\n")[0].decode().split("\r\n")
    assert status_line.split()[1] == "413", answer[:300]
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().title()] = value.strip()
    assert_secured(headers)
