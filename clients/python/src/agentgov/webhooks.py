"""Checking a decision webhook the control plane sent (stdlib only).

The control plane signs each call when `DECISION_WEBHOOK_SECRET` is set:
`X-AgentGov-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from agentgov.errors import AgentGovError

SIGNATURE_HEADER = "X-AgentGov-Signature"


class BadSignature(AgentGovError):
    """The call was not signed with our secret, or it is too old to trust (a replay)."""


def header(headers: Mapping[str, str], name: str) -> str:
    """A header's value from any mapping, looked up case-insensitively ("" when absent)."""
    return next((v for k, v in headers.items() if k.lower() == name.lower()), "")


def verify_signed(headers: Mapping[str, str], name: str, secret: str,
                  signed_text: Callable[[int], bytes], *, tolerance: float, now: float | None,
                  what: str) -> None:
    """Check a `t=<unix seconds>,v1=<hex HMAC-SHA256>` header over `signed_text(t)` and its
    age; raise `BadSignature` naming what does not hold (one parser for every signed call)."""
    value = header(headers, name)
    if not value:
        raise BadSignature(f"no {name} header")
    fields = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
        given = fields["v1"]
    except (KeyError, ValueError):
        raise BadSignature(f"malformed {name} header") from None
    expected = hmac.new(secret.encode(), signed_text(timestamp), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, given):
        raise BadSignature(f"the signature does not match this {what} and secret")
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        raise BadSignature(f"signed {timestamp}, outside the {tolerance:.0f}s tolerance")


def verify(body: bytes, headers: Mapping[str, str], secret: str, *,
           tolerance: float = 300.0, now: float | None = None) -> dict[str, Any]:
    """The decision in a webhook call, once its signature and age check out.

    `body` is the raw request body as received (not re-serialised JSON); `headers` any
    mapping (looked up case-insensitively). Raises `BadSignature` otherwise.
    """
    verify_signed(headers, SIGNATURE_HEADER, secret, lambda t: f"{t}.".encode() + body,
                  tolerance=tolerance, now=now, what="body")
    return json.loads(body)
