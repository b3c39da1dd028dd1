"""http: the control plane calls the agent platform's API.

GET {url}/agents/{name}/state and POST {url}/agents/{name}/changes with an Idempotency-Key,
each signed (connectors/signing.py) under the platform secret the manifest names, which an admin
must have granted to the agent's owner. Every request goes through the outbound guard
(config/outbound.py): allow-listed host and port, checked resolved address, no
redirects. Timeouts, and retries with backoff for what is safe to retry. Whatever goes wrong,
the error people see says only "platform unreachable"; the detail goes to the log.
"""

import json
import logging
import time
from typing import Any
from urllib.parse import quote, urlsplit

from django.conf import settings

from config import outbound, retries
from reconciliation.attribution import split_change
from reconciliation.connectors.base import ApplyOutcome, ConnectorError
from reconciliation.connectors.signing import SIGNATURE_HEADER, sign_request
from registry.connector_secrets import granted, secret_value
from registry.models import Agent

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 5
UNREACHABLE = "platform unreachable"


class _Retry(Exception):
    """This attempt failed in a way worth trying again."""


class HttpConnector:
    """A platform reached over HTTP."""

    name = "http"

    last_change: dict[str, Any] | None = None

    def __init__(self, url: str, secret_name: str) -> None:
        self.url = url
        self.secret_name = secret_name
        self.base_path = quote(urlsplit(url).path.rstrip("/"), safe="/%")

    def _fail(self, agent: Agent, detail: str) -> ConnectorError:
        log.warning("http connector of %s: %s", agent.name, detail)
        return ConnectorError(UNREACHABLE, detail=detail)

    def _secret(self, agent: Agent) -> str:
        # Checked on every call: a revoked grant or a new owner stops the signing at once.
        value = secret_value(self.secret_name)
        if not granted(agent.owner, self.secret_name) or not value:
            raise self._fail(agent, f"connector secret {self.secret_name} is not granted to "
                             f"{agent.owner.username}, or not set")
        return value

    def _attempt(self, agent: Agent, method: str, path: str, key: str, body: bytes,
                 secret: str) -> dict[str, Any]:
        try:
            destination = outbound.check(self.url, settings.CONNECTOR_ALLOWED_HOSTS)
        except outbound.Refused as error:
            raise self._fail(agent, f"refused: {error}") from None
        headers = {"Accept": "application/json", "Cache-Control": "no-cache",
                   SIGNATURE_HEADER: sign_request(secret, method, path, key, body,
                                                  int(time.time()))}
        if key:
            headers["Idempotency-Key"] = key
        if method == "POST":
            headers["Content-Type"] = "application/json"
        try:
            answer = outbound.send(destination, method, path, headers, body or None,
                                   timeout=TIMEOUT_SECONDS,
                                   max_bytes=settings.OUTBOUND_MAX_ANSWER_BYTES)
        except OSError as error:
            raise _Retry(f"{destination.host}:{destination.port} unreachable: {error}") from None
        if answer.status >= 500:
            raise _Retry(f"{destination.host}:{destination.port} answered {answer.status}")
        if answer.status >= 300:  # redirects are never followed: they could point anywhere
            raise self._fail(agent, f"{method} {path} answered {answer.status}")
        try:
            reply = json.loads(answer.body or b"{}")
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise self._fail(agent, f"{method} {path} answered something not a JSON object")
        return reply

    def _call(self, agent: Agent, method: str, suffix: str, key: str = "",
              body: bytes = b"") -> dict[str, Any]:
        secret = self._secret(agent)
        path = f"{self.base_path}/agents/{agent.name}/{suffix}"
        try:
            return retries.connector_call(
                lambda: self._attempt(agent, method, path, key, body, secret), retry_on=_Retry)
        except _Retry as error:
            raise self._fail(agent, str(error)) from None

    def observe(self, agent: Agent) -> dict[str, Any] | None:
        """The platform's answer, without its optional change_id / changed_by (kept as
        last_change for drift attribution)."""
        reply = self._call(agent, "GET", "state")
        if not isinstance(reply, dict):
            return reply
        state, self.last_change = split_change(reply, reported_by="platform (http connector)")
        return state

    def apply(self, agent: Agent, operation: dict[str, Any], key: str) -> ApplyOutcome:
        body = json.dumps({"operation": operation}, sort_keys=True).encode()
        # POST is safe to retry here: the key makes a repeat a no-op on the platform.
        reply = self._call(agent, "POST", "changes", key, body)
        return ApplyOutcome.DUPLICATE if reply.get("duplicate") else ApplyOutcome.APPLIED
