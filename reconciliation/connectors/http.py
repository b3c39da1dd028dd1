"""http: the control plane calls the agent platform's API.

GET {url}/agents/{name}/state and POST {url}/agents/{name}/changes with an Idempotency-Key
header and X-Signature: sha256=<HMAC-SHA256 of the body> under the secret in the environment
variable the manifest names. Timeouts, and retries with backoff for what is safe to retry.
"""

import hashlib
import hmac
import json
import os
import random
import time
import urllib.error
import urllib.request
from typing import Any

from reconciliation.connectors.base import ApplyOutcome, ConnectorError
from registry.models import Agent

TIMEOUT_SECONDS = 5
ATTEMPTS = 3


def sign(secret: str, body: bytes) -> str:
    """The X-Signature header value for a body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class HttpConnector:
    """A platform reached over HTTP."""

    name = "http"

    def __init__(self, url: str, secret_env: str) -> None:
        self.url = url.rstrip("/")
        self.secret_env = secret_env

    def _secret(self) -> str:
        secret = os.environ.get(self.secret_env)
        if not secret:
            raise ConnectorError(f"the environment variable {self.secret_env} is not set")
        return secret

    def _call(self, request: urllib.request.Request) -> tuple[int, dict[str, Any]]:
        delay = 0.2
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                    return response.status, json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as error:
                if error.code < 500 or attempt == ATTEMPTS:
                    raise ConnectorError(f"{request.full_url} answered {error.code}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                if attempt == ATTEMPTS:
                    raise ConnectorError(f"{request.full_url} unreachable: {error}") from None
            time.sleep(delay + random.uniform(0, delay))  # noqa: S311 (jitter, not crypto)
            delay *= 2
        raise ConnectorError("unreachable")  # pragma: no cover (the loop returns or raises)

    def observe(self, agent: Agent) -> dict[str, Any] | None:
        request = urllib.request.Request(
            f"{self.url}/agents/{agent.name}/state",
            headers={"Accept": "application/json", "Cache-Control": "no-cache",
                     "X-Signature": sign(self._secret(), b"")})
        _, state = self._call(request)
        return state

    def apply(self, agent: Agent, operation: dict[str, Any], key: str) -> ApplyOutcome:
        body = json.dumps({"operation": operation}, sort_keys=True).encode()
        request = urllib.request.Request(
            f"{self.url}/agents/{agent.name}/changes", data=body, method="POST",
            headers={"Content-Type": "application/json", "Idempotency-Key": key,
                     "X-Signature": sign(self._secret(), body)})
        # POST is safe to retry here: the key makes a repeat a no-op on the platform.
        status, reply = self._call(request)
        return ApplyOutcome.DUPLICATE if reply.get("duplicate") else ApplyOutcome.APPLIED
