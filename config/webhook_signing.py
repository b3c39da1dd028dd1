"""How the control plane signs an outbound call (decision webhooks, HTTP audit witnesses).

Pure and neutral, so both reconciliation and audit use it without audit depending on
reconciliation. The scheme is the one `agentgov.webhooks.verify` checks on the receiving side:
HMAC-SHA256 over `"{timestamp}.{body}"`, sent as `X-AgentGov-Signature: t=..,v1=..`, so a
receiver can reject forged and replayed calls.
"""

import hashlib
import hmac

from agentgov.webhooks import SIGNATURE_HEADER

__all__ = ["SIGNATURE_HEADER", "signature"]


def signature(body: bytes, secret: str, timestamp: int) -> str:
    """The header value for `body` sent at `timestamp` (Unix seconds)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"
