"""Checking a request the control plane's http connector sent to your platform (stdlib only).

Each request carries `X-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>` under the secret the
control plane's admin shares with your platform, over

    "<t>\\n<METHOD>\\n<path>\\n<Idempotency-Key or empty>\\n" + raw body

so a signed request cannot be replayed with another method, to another agent's path, under
another key, or after the tolerance (5 minutes by default). A replay inside the window repeats
the same key: honour Idempotency-Key and it changes nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

from agentgov.webhooks import BadSignature

SIGNATURE_HEADER = "X-Signature"
KEY_HEADER = "Idempotency-Key"


def signed_text(timestamp: int, method: str, path: str, key: str, body: bytes) -> bytes:
    """What the signature covers."""
    return f"{timestamp}\n{method.upper()}\n{path}\n{key}\n".encode() + body


def _header(headers: Mapping[str, str], name: str) -> str:
    return next((v for k, v in headers.items() if k.lower() == name.lower()), "")


def verify_request(method: str, path: str, headers: Mapping[str, str], body: bytes,
                   secret: str, *, tolerance: float = 300.0, now: float | None = None) -> None:
    """Return when the request is the control plane's, as sent, and recent; raise
    `BadSignature` otherwise. `path` is the request path as received (no query string)."""
    value = _header(headers, SIGNATURE_HEADER)
    if not value:
        raise BadSignature(f"no {SIGNATURE_HEADER} header")
    fields = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
        given = fields["v1"]
    except (KeyError, ValueError):
        raise BadSignature(f"malformed {SIGNATURE_HEADER} header") from None
    text = signed_text(timestamp, method, path, _header(headers, KEY_HEADER), body)
    expected = hmac.new(secret.encode(), text, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, given):
        raise BadSignature("the signature does not match this request and secret")
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        raise BadSignature(f"signed {timestamp}, outside the {tolerance:.0f}s tolerance")
