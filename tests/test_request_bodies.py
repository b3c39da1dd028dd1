"""Bodies as an attacker sends them: compressed bombs and stacked encodings on every ingest
endpoint, and chunked bodies (no Content-Length) sent over a raw socket to a real daphne."""

import functools
import gzip
import json
import socket
import tracemalloc
import zlib
from urllib.parse import urlsplit

import pytest

from audit.models import AuditEntry
from reconciliation import actions as reconciliation_actions
from reconciliation.models import Finding, ObservedState
from registry import actions as registry_actions
from registry.models import DesiredStateVersion
from runtime.models import BehaviourEvent, Decision
from tests.conftest import REFUND_AGENT_YAML, approved_agent, refund_manifest

OBSERVED = "/api/v1/agents/refund-agent/observed-state"
ENDPOINTS = [("PUT", OBSERVED), ("POST", "/api/v1/events"), ("POST", "/v1/traces"),
             ("POST", "/api/v1/manifests"), ("POST", "/api/v1/agents/refund-agent/decisions")]


def report() -> dict:
    state = {k: v for k, v in refund_manifest().spec.items() if k != "enforcement"}
    return {**state, "running": True}


def is_the_report(state: dict) -> bool:
    """The stored observation is the report sent (stored canonicalised: limits sorted)."""
    sent = report()
    return (state["model"], state["running"], state["tools"], len(state["limits"]),
            state["actions"]) == (sent["model"], True, sent["tools"], 2, sent["actions"])


def zeros_gzip(megabytes: int) -> bytes:
    """gzip of `megabytes` MB of zeros, made a MB at a time (about 1,000 to 1)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (1 << 20)
    return b"".join(packer.compress(block) for _ in range(megabytes)) + packer.flush()


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


@functools.cache
def bomb() -> bytes:
    return zeros_gzip(256)  # 256 MB of zeros in ~250 KB


# Made when a test asks (a few seconds of CPU), not when the module is collected: every
# worker of the suite collects it, one runs it.
ENCODED_BOMBS = {
    "gzip": lambda: ("gzip", bomb()),
    "x-gzip": lambda: ("x-gzip", bomb()),
    "deflate (zlib)": lambda: ("deflate", zlib.compress(b"\0" * (64 << 20), 9)),
    "deflate (raw)": lambda: ("deflate", raw_deflate(b"\0" * (64 << 20))),
    "gzip twice (1 GB in a few KB)": lambda: ("gzip, gzip", gzip.compress(zeros_gzip(1024))),
    "identity then gzip": lambda: ("identity, gzip", bomb()),
    "two gzip members": lambda: ("gzip", bomb() + bomb()),
}


@functools.cache
def encoded_bomb(case: str) -> tuple[str, bytes]:
    return ENCODED_BOMBS[case]()


def snapshot() -> tuple:
    return (ObservedState.objects.count(), DesiredStateVersion.objects.count(),
            Decision.objects.count(), BehaviourEvent.objects.count(),
            AuditEntry.objects.count())


@pytest.mark.django_db
@pytest.mark.parametrize("method, path", ENDPOINTS)
@pytest.mark.parametrize("case", list(ENCODED_BOMBS))
def test_a_decompression_bomb_stops_at_the_body_limit_with_413(
        agent_client, api_as, people, method, path, case):
    client = api_as(people.alice) if path == "/api/v1/manifests" else agent_client
    encoding, body = encoded_bomb(case)
    before = snapshot()
    tracemalloc.start()
    try:
        response = client.generic(method, path, body, content_type="application/json",
                                  HTTP_CONTENT_ENCODING=encoding)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 413, (case, response.status_code, response.content[:200])
    assert response.json()["error"]["code"] == "too_large"
    assert peak < 16 << 20, f"inflating held {peak >> 20} MB"
    assert snapshot() == before


@pytest.mark.django_db
@pytest.mark.parametrize("method, path", ENDPOINTS)
@pytest.mark.parametrize("encoding, body, status", [
    ("br", b"\x1b\x00", 415), ("compress", b"x", 415), ("gzip, zstd", b"x", 415),
    ("gzip", b"\x1f\x8b\x08\x00garbage", 400), ("gzip", gzip.compress(b"{}")[:-6], 400),
    ("deflate", b"not deflate at all", 400),
], ids=["br", "compress", "stacked unknown", "corrupt gzip", "truncated gzip",
        "corrupt deflate"])
def test_unknown_or_corrupt_encodings_get_the_json_error(
        agent_client, api_as, people, method, path, encoding, body, status):
    client = api_as(people.alice) if path == "/api/v1/manifests" else agent_client
    before = snapshot()
    response = client.generic(method, path, body, content_type="application/json",
                              HTTP_CONTENT_ENCODING=encoding)
    assert response.status_code == status, response.content[:200]
    assert set(response.json()["error"]) == {"code", "message", "details"}
    assert snapshot() == before


@pytest.mark.django_db
@pytest.mark.parametrize("encoding, pack", [
    ("gzip", gzip.compress), ("deflate", zlib.compress),
    ("gzip, deflate", lambda body: zlib.compress(gzip.compress(body))),
])
def test_a_compressed_report_is_read_as_sent(agent_client, refund_agent, encoding, pack):
    response = agent_client.generic("PUT", OBSERVED, pack(json.dumps(report()).encode()),
                                    content_type="application/json",
                                    HTTP_CONTENT_ENCODING=encoding)
    assert response.status_code == 202, response.content[:300]
    assert is_the_report(ObservedState.objects.get().state)


# --- chunked bodies through a real daphne ----------------------------------------------------


def raw_request(url: str, method: str, path: str, chunks: list[bytes], headers: dict) -> tuple:
    """Send a request with Transfer-Encoding: chunked (no Content-Length) over a raw socket;
    the status and the JSON body of the answer."""
    parts = urlsplit(url)
    head = [f"{method} {path} HTTP/1.1", f"Host: {parts.hostname}:{parts.port}",
            "Transfer-Encoding: chunked", "Connection: close",
            *[f"{k}: {v}" for k, v in headers.items()]]
    payload = "\r\n".join(head).encode() + b"\r\n\r\n"
    for chunk in chunks:
        payload += f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    payload += b"0\r\n\r\n"
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as conn:
        conn.sendall(payload)
        answer = b""
        while block := conn.recv(65536):
            answer += block
    status_line, _, rest = answer.partition(b"\r\n")
    header_block, _, body = rest.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in header_block.lower():
        body = unchunk(body)
    return int(status_line.split()[1]), json.loads(body) if body else None


def unchunk(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out, body = out + body[:size], body[size + 2:]
    return out


def pieces(data: bytes, size: int = 97) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def test_a_chunked_observed_state_is_read_whole_not_as_empty(shared_server_process, people):
    # A push agent: the reconciler diffs what the agent reports, so a report read as {} drifts.
    refund_agent = approved_agent(people, "refund-agent", connector={"type": "push"})
    _, key = registry_actions.issue_agent_token(refund_agent, actor=people.alice)
    status, body = raw_request(
        shared_server_process.url, "PUT", OBSERVED, pieces(json.dumps(report()).encode()),
        {"Authorization": f"Token {key}", "Content-Type": "application/json"})
    assert status == 202, body
    assert is_the_report(ObservedState.objects.get().state)
    reconciliation_actions.reconcile_agent(refund_agent.pk, trigger="observation")
    assert not Finding.objects.exists()  # no false drift from a report read as {}


def test_chunked_bodies_reach_every_body_taking_endpoint_whole(shared_server_process, people,
                                                               refund_agent):
    _, agent_key = registry_actions.issue_agent_token(refund_agent, actor=people.alice)
    _, alice_key = registry_actions.issue_api_token(people.alice, actor="system:test")
    as_agent = {"Authorization": f"Token {agent_key}", "Content-Type": "application/json"}
    event = {"id": "e-1", "agent": "refund-agent", "ts": "2026-11-30T00:00:00Z",
             "kind": "tool_call", "tool": "orders.lookup"}
    from django.utils import timezone

    event["ts"] = timezone.now().isoformat()
    status, body = raw_request(shared_server_process.url, "POST", "/api/v1/events",
                               pieces(json.dumps([event]).encode()), as_agent)
    assert (status, body["accepted"]) == (200, 1), body
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8,
            "startTimeUnixNano": str(int(timezone.now().timestamp() * 1e9)),
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                {"key": "gen_ai.tool.name", "value": {"stringValue": "orders.lookup"}},
                {"key": "gen_ai.agent.name", "value": {"stringValue": "refund-agent"}}]}
    traces = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    status, body = raw_request(shared_server_process.url, "POST", "/v1/traces",
                               pieces(json.dumps(traces).encode()), as_agent)
    assert status == 200, body
    assert BehaviourEvent.objects.filter(source="otlp").count() == 1
    status, body = raw_request(shared_server_process.url, "POST",
                               "/api/v1/agents/refund-agent/decisions",
                               pieces(json.dumps({"action": "payments.refund",
                                                  "amount": 900}).encode()), as_agent)
    assert status in (200, 201, 202) and body["outcome"] == "pending", body
    manifest = REFUND_AGENT_YAML.replace("gpt-4.1", "gpt-5")
    status, body = raw_request(shared_server_process.url, "POST", "/api/v1/manifests?dry_run=1",
                               pieces(manifest.encode()),
                               {"Authorization": f"Token {alice_key}",
                                "Content-Type": "application/yaml"})
    assert status == 200 and body["results"][0]["action"] == "proposed", body


def test_a_chunked_body_past_the_limit_is_a_413_and_changes_nothing(shared_server_process, people,
                                                                    refund_agent, settings):
    _, key = registry_actions.issue_agent_token(refund_agent, actor=people.alice)
    before = snapshot()
    huge = json.dumps({**report(), "model": "x" * (2 << 20)}).encode()
    status, body = raw_request(shared_server_process.url, "PUT", OBSERVED, pieces(huge, 65536),
                               {"Authorization": f"Token {key}",
                                "Content-Type": "application/json"})
    assert status == 413 and body["error"]["code"] == "too_large"
    assert snapshot() == before


@pytest.mark.django_db
def test_a_wsgi_server_passing_a_chunked_body_without_its_length_gets_a_411(refund_agent,
                                                                             people):
    # Under WSGI Django sizes the body by CONTENT_LENGTH alone, so without it the body would be
    # read as empty; the body-limit middleware refuses it instead.
    import io

    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from config.wsgi import application

    _, key = registry_actions.issue_agent_token(refund_agent, actor=people.alice)
    body = json.dumps(report()).encode()
    environ = {
        "REQUEST_METHOD": "PUT", "PATH_INFO": OBSERVED, "SERVER_NAME": "testserver",
        "SERVER_PORT": "80", "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(), "CONTENT_TYPE": "application/json",
        "HTTP_TRANSFER_ENCODING": "chunked", "HTTP_AUTHORIZATION": f"Token {key}",
    }
    answer: dict = {}
    # As Django's test client does: keep the test's connection (and transaction) open.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        content = b"".join(application(environ, lambda status, headers: answer.update(
            status=status)))
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    assert answer["status"].startswith("411"), (answer, content)
    assert json.loads(content)["error"]["code"] == "length_required"
    assert not ObservedState.objects.exists()
