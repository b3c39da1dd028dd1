"""How the http connector signs a request (the platform contract; README, "Connecting an agent").

HMAC-SHA256 over `"<t>\\n<METHOD>\\n<path>\\n<Idempotency-Key>\\n" + body`, sent as
`X-Signature: t=<unix seconds>,v1=<hex>`. `agentgov.platform.verify_request` is the other side.
"""

import hashlib
import hmac

SIGNATURE_HEADER = "X-Signature"


def sign_request(secret: str, method: str, path: str, key: str, body: bytes,
                 timestamp: int) -> str:
    """The X-Signature header value for one request."""
    text = f"{timestamp}\n{method.upper()}\n{path}\n{key}\n".encode() + body
    digest = hmac.new(secret.encode(), text, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"
