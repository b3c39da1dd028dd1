"""Checking a request the control plane's http connector sent to your platform (stdlib only).

Each request carries `X-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>` under the secret the
control plane's admin shares with your platform, over

    "<t>\\n<METHOD>\\n<path>\\n<Idempotency-Key or empty>\\n" + raw body

so a signed request cannot be replayed with another method, to another agent's path, under
another key, or after the tolerance (5 minutes by default). A replay inside the window repeats
the same key: honour Idempotency-Key and it changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentgov.webhooks import BadSignature, header, verify_signed

__all__ = ["BadSignature", "KEY_HEADER", "SIGNATURE_HEADER", "signed_text", "verify_request"]

SIGNATURE_HEADER = "X-Signature"
KEY_HEADER = "Idempotency-Key"


def signed_text(timestamp: int, method: str, path: str, key: str, body: bytes) -> bytes:
    """What the signature covers."""
    return f"{timestamp}\n{method.upper()}\n{path}\n{key}\n".encode() + body


def verify_request(method: str, path: str, headers: Mapping[str, str], body: bytes,
                   secret: str, *, tolerance: float = 300.0, now: float | None = None) -> None:
    """Return when the request is the control plane's, as sent, and recent; raise
    `BadSignature` otherwise. `path` is the request path as received (no query string)."""
    key = header(headers, KEY_HEADER)
    verify_signed(headers, SIGNATURE_HEADER, secret,
                  lambda t: signed_text(t, method, path, key, body),
                  tolerance=tolerance, now=now, what="request")
