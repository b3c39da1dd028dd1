"""Decision webhooks: how a call is signed (where it may go: config/outbound.py).

The signing itself lives in config/webhook_signing.py, shared with the audit trail's HTTP
witnesses (audit must not depend on reconciliation); it is re-exported here for the webhook code.
"""

from config.webhook_signing import SIGNATURE_HEADER, signature

__all__ = ["SIGNATURE_HEADER", "signature"]
