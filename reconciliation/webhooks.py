"""Decision webhooks: which hosts the control plane may call, and how a call is signed.

Pure functions. The signature scheme is the one `agentgov.webhooks.verify` checks on the agent
side: HMAC-SHA256 over `"{timestamp}.{body}"`, sent as `X-AgentGov-Signature: t=..,v1=..`, so a
receiver can reject forged and replayed calls.
"""

import fnmatch
import hashlib
import hmac
from urllib.parse import urlsplit

SIGNATURE_HEADER = "X-AgentGov-Signature"


def host_allowed(url: str, patterns: list[str]) -> bool:
    """True when the URL is http(s) and its host matches one of `patterns` (`*.corp.example`
    style globs, case-insensitive). No patterns: no webhooks at all."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not host or parts.username or parts.password:
        return False
    return any(fnmatch.fnmatchcase(host, pattern.lower()) for pattern in patterns)


def signature(body: bytes, secret: str, timestamp: int) -> str:
    """The header value for `body` sent at `timestamp` (Unix seconds)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"
