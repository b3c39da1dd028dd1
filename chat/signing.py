"""Slack's request signing (v0): HMAC-SHA256 with the app's signing secret over
`v0:<timestamp>:<raw body>`, sent as `X-Slack-Signature: v0=<hex>` with
`X-Slack-Request-Timestamp`. Pure Python, no Django."""

import hashlib
import hmac


class BadSignature(ValueError):
    """The request is not Slack's, or not Slack's now."""


def sign(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def verify(secret: str, timestamp: str | None, body: bytes, signature: str | None,
           now: float, max_age: int) -> None:
    """Raise BadSignature unless the body was signed with `secret` within `max_age` seconds
    of `now` (either side: a clock ahead is as suspect as one behind)."""
    if not secret:
        raise BadSignature("Slack requests are not accepted here (no signing secret is set)")
    if not timestamp or not signature or not timestamp.isdigit():
        raise BadSignature("the request is not signed")
    if abs(now - int(timestamp)) > max_age:
        raise BadSignature("the request's timestamp is outside the accepted window")
    if not hmac.compare_digest(sign(secret, timestamp, body), signature):
        raise BadSignature("the request's signature does not match")
