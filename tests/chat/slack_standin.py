"""A local stand-in for Slack: it takes our incoming-webhook posts and response-URL answers
(checking their shape as Slack would), and sends clicks and commands to the product signed as
Slack signs them (v0, HMAC-SHA256 over `v0:timestamp:body`)."""

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

from config import embedded_redis

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


class SlackStandIn:
    def __init__(self, secret: str = SECRET, team: str = "T0GOVERN") -> None:
        self.secret, self.team = secret, team
        self.port = embedded_redis.free_port()
        self.webhook_posts: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []
        self.problems: list[str] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = stand_in.take(self.path, self.headers.get("Content-Type", ""), body)
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"no")

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def webhook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/services/{self.team}/B0HOOK/xyz"

    def response_url(self, n: int) -> str:
        return f"http://127.0.0.1:{self.port}/actions/{self.team}/{n}/resp"

    def take(self, path: str, content_type: str, body: bytes) -> int:
        """What Slack checks of what it is sent: JSON with text, and blocks on webhooks."""
        if not content_type.startswith("application/json"):
            self.problems.append(f"{path}: content type {content_type}")
            return 400
        message = json.loads(body)
        if not isinstance(message.get("text"), str) or not message["text"]:
            self.problems.append(f"{path}: no text")
            return 400
        if path.startswith("/services/"):
            for block in message.get("blocks", []):
                assert block["type"] in ("section", "actions"), block
            self.webhook_posts.append(message)
        elif path.startswith("/actions/"):
            self.responses.append({"path": path, **message})
        else:
            return 404
        return 200

    def signed(self, body: bytes, *, at: float | None = None,
               secret: str | None = None) -> dict[str, str]:
        timestamp = str(int(time.time() if at is None else at))
        base = b"v0:" + timestamp.encode() + b":" + body
        digest = hmac.new((secret or self.secret).encode(), base, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": f"v0={digest}"}

    def click_body(self, user: str, action_id: str, value: str, n: int = 1,
                   name: str = "someone") -> bytes:
        payload = {"type": "block_actions", "team": {"id": self.team, "domain": "govern"},
                   "user": {"id": user, "username": name, "name": name, "team_id": self.team},
                   "actions": [{"action_id": action_id, "value": value, "type": "button",
                                "block_id": value, "action_ts": str(time.time())}],
                   "response_url": self.response_url(n)}
        return urlencode({"payload": json.dumps(payload)}).encode()

    def command_body(self, user: str, text: str) -> bytes:
        return urlencode({"command": "/agentgov", "text": text, "team_id": self.team,
                          "user_id": user, "user_name": "whoever"}).encode()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
