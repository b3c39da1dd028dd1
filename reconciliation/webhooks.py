"""Decision webhooks: how a call is signed (where it may go: reconciliation/outbound.py).

Pure functions. The signature scheme is the one `agentgov.webhooks.verify` checks on the agent
side: HMAC-SHA256 over `"{timestamp}.{body}"`, sent as `X-AgentGov-Signature: t=..,v1=..`, so a
receiver can reject forged and replayed calls.
"""

import hashlib
import hmac

SIGNATURE_HEADER = "X-AgentGov-Signature"


def signature(body: bytes, secret: str, timestamp: int) -> str:
    """The header value for `body` sent at `timestamp` (Unix seconds)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"
