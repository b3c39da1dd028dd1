"""A small but real agent platform over HTTP, for the http connector's tests: it keeps each
agent's state, checks each request's signature (method, path, key, body, time) with the client
library as a platform following our contract would, refuses replays older than the window, and
honours Idempotency-Key. It records every request, so it also plays the attacker's server."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentgov.platform import verify_request
from agentgov.webhooks import BadSignature

from reconciliation.reconciler.diff import apply_operations


class Platform:
    """The platform's state, shared with its request handler."""

    def __init__(self, secret: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.secret = secret
        self.clock_offset = 0.0  # seconds this platform's clock runs ahead (replays, later)
        self.redirect_to: str | None = None  # answer every request with a 302 to here
        self.received: list[dict[str, Any]] = []  # every request, as it arrived
        self.states: dict[str, dict[str, Any]] = {}
        self.applied: dict[str, dict[str, Any]] = {}  # idempotency key -> operation
        self.apply_count = 0
        self.fail_next = 0  # answer 503 to this many requests
        self.refuse_changes = False  # answer 409 to every change (a platform-side policy)
        self.hold_change: int | None = None  # hold the Nth change open (a worker dies meanwhile)
        self.changes_seen = 0
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, port), self._handler())
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "Platform":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _signed(self, body: bytes) -> bool:
                try:
                    verify_request(self.command, self.path.split("?")[0], self.headers, body,
                                   platform.secret, now=time.time() + platform.clock_offset)
                except BadSignature:
                    return False
                return True

            def _record(self, body: bytes) -> bool:
                """Keep the request; True when it was answered here with a redirect."""
                platform.received.append({"method": self.command, "path": self.path,
                                          "headers": dict(self.headers), "body": body})
                if platform.redirect_to is None:
                    return False
                self.send_response(302)
                self.send_header("Location", platform.redirect_to + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return True

            def _agent(self, suffix: str) -> str | None:
                parts = self.path.strip("/").split("/")
                if len(parts) == 3 and parts[0] == "agents" and parts[2] == suffix:
                    return parts[1]
                return None

            def _flaky(self) -> bool:
                with platform.lock:
                    if platform.fail_next:
                        platform.fail_next -= 1
                        return True
                return False

            def do_GET(self) -> None:  # noqa: N802
                if self._record(b""):
                    return None
                name = self._agent("state")
                if name is None or name not in platform.states:
                    return self._reply(404, {"error": "no such agent"})
                if not self._signed(b""):
                    return self._reply(401, {"error": "bad signature"})
                if self._flaky():
                    return self._reply(503, {"error": "try again"})
                with platform.lock:
                    return self._reply(200, platform.states[name])

            def do_POST(self) -> None:  # noqa: N802
                name = self._agent("changes")
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self._record(body):
                    return None
                if name is None or name not in platform.states:
                    return self._reply(404, {"error": "no such agent"})
                if not self._signed(body):
                    return self._reply(401, {"error": "bad signature"})
                if self._flaky():
                    return self._reply(503, {"error": "try again"})
                if platform.refuse_changes:
                    return self._reply(409, {"error": "change refused by platform policy"})
                key = self.headers.get("Idempotency-Key", "")
                if not key:
                    return self._reply(400, {"error": "Idempotency-Key required"})
                with platform.lock:
                    platform.changes_seen += 1
                    hold = platform.changes_seen == platform.hold_change
                if hold:
                    time.sleep(3)  # the caller is killed while waiting for this answer
                operation = json.loads(body)["operation"]
                with platform.lock:
                    if key in platform.applied:
                        return self._reply(200, {"duplicate": True})
                    platform.states[name] = apply_operations(platform.states[name],
                                                             [operation])
                    platform.applied[key] = operation
                    platform.apply_count += 1
                return self._reply(200, {"duplicate": False})

        return Handler
