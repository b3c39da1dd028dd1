"""Checkpoints published to witnesses outside the database: an HTTP witness receives each one as
a signed POST from a real RQ worker (retried while it is down), a directory witness keeps one
file per checkpoint that is never overwritten."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from agentgov.webhooks import BadSignature, verify

import audit
from audit.choices import AuditAction
from audit.models import AuditCheckpoint
from audit.witnesses import post, write_copy
from config import outbound
from tests.conftest import eventually

SECRET = "witness-shared-secret"


class Witness:
    """A stand-in witness service: refuses the first `down` calls, then keeps what it is sent."""

    def __init__(self, down: int = 0) -> None:
        self.down, self.received, self.refused = down, [], []
        witness = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = 201
                if witness.down > 0:
                    witness.down, status = witness.down - 1, 503
                else:
                    try:
                        witness.received.append(verify(body, dict(self.headers), SECRET))
                    except BadSignature as error:
                        witness.refused.append(str(error))
                        status = 401
                self.send_response(status)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/checkpoints"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def witness():
    server = Witness(down=1)
    yield server
    server.close()


def test_an_http_witness_receives_every_checkpoint_signed_even_after_an_outage(
        start_worker, witness, settings, key_file):
    settings.AUDIT_CHECKPOINT_EVERY = 2
    settings.AUDIT_WITNESSES = [witness.url]
    start_worker("default", AUDIT_WITNESSES=witness.url, AUDIT_WITNESS_SECRET=SECRET,
                 AUDIT_PRIVATE_KEY_FILE=str(key_file))
    for i in range(4):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}")
    expected = [c.to_dict() for c in AuditCheckpoint.objects.order_by("seq")]
    assert [c["size"] for c in expected] == [2, 4]
    eventually(lambda: len(witness.received) == 2, timeout=60,
               message="the witness did not receive both checkpoints")
    assert sorted(witness.received, key=lambda c: c["size"]) == expected
    assert witness.refused == []


CHECKPOINT = {"size": 4, "root": "ab" * 32, "at": "2026-11-30T18:00:00.000000Z",
              "key_id": "0" * 16, "algorithm": "ed25519", "signature": "c2ln"}


def test_a_witness_post_goes_through_the_outbound_guard(witness, settings, monkeypatch):
    """The POST is checked like an agent's webhook: a URL the workers were not configured with
    is refused, and so is a witness's name that resolves inside (here to the very loopback
    address the stand-in listens on); nothing reaches the server."""
    port = witness.server.server_address[1]
    settings.AUDIT_WITNESS_HOSTS = []  # the process was configured with no HTTP witness
    with pytest.raises(outbound.Refused, match="not in the allow-list"):
        post(witness.url, CHECKPOINT)
    named = f"http://witness.example:{port}/checkpoints"
    settings.AUDIT_WITNESS_HOSTS = outbound.naming_entries([named])
    monkeypatch.setattr(outbound, "resolve", lambda host, port: ["127.0.0.1"])
    with pytest.raises(outbound.Refused, match="an address the allow-list does not name"):
        post(named, CHECKPOINT)
    assert (witness.down, witness.received, witness.refused) == (1, [], [])  # never called


def test_a_directory_witness_never_overwrites_a_copy(tmp_path):
    checkpoint = {"size": 4, "root": "ab" * 32, "at": "2026-11-30T18:00:00.000000Z",
                  "key_id": "0" * 16, "algorithm": "ed25519", "signature": "c2ln"}
    folder = tmp_path / "witness"
    write_copy(folder, checkpoint)
    write_copy(folder, {**checkpoint, "root": "cd" * 32})
    (copy,) = folder.iterdir()
    assert copy.name == "checkpoint-000000000004.json"
    assert json.loads(copy.read_text()) == checkpoint
