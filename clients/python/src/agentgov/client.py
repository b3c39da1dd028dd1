"""The HTTP client of the control plane's v1 API, for agents and for people's scripts."""

from __future__ import annotations

import os
import random
import ssl
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from agentgov.control_link import ControlLink
from agentgov.errors import RateLimited, Unreachable, error_from_response
from agentgov.events import EventBatcher
from agentgov.responses import Decision, DesiredState, EventsResult, Observation
from agentgov.version import VERSION

EVENT_KINDS = ("tool_call", "data_access", "action")
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
# The request never left this machine: retrying cannot do anything twice.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# The request may have been processed and its answer lost: retry only idempotent requests.
MAYBE_SENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
RETRY_STATUSES_IDEMPOTENT = frozenset({500, 502, 503, 504})
_tls_contexts: dict[tuple[str | None, str | None], ssl.SSLContext] = {}


def verifying_tls() -> ssl.SSLContext:
    """httpx's verifying TLS context (its CA bundle, or SSL_CERT_FILE / SSL_CERT_DIR), made
    once per process and CA setting and shared by every client: loading the CA bundle cost
    each new client tens of milliseconds of CPU, even for an http:// control plane."""
    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    context = _tls_contexts.get(key)
    if context is None:
        context = _tls_contexts[key] = httpx.create_ssl_context()
    return context


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter. 429 and requests that never left are retried for
    every method; lost answers and 5xx only for idempotent requests; other 4xx never."""

    attempts: int = 4
    base: float = 0.25
    cap: float = 8.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.cap, self.base * 2 ** (attempt - 1)))


def _timestamp(ts: datetime | str | None) -> str:
    """RFC 3339 with a zone, as the events API requires."""
    if ts is None:
        return datetime.now(UTC).isoformat()
    if isinstance(ts, str):
        return ts
    if ts.tzinfo is None:
        raise ValueError("an event time needs a time zone")
    return ts.isoformat()


class Client:
    """One control plane, one token. `agent` is the agent that agent-facing calls act for
    (an agent's token acts for its own agent only); people's calls ignore it."""

    def __init__(self, url: str, token: str, *, agent: str | None = None,
                 timeout: float = 10.0, retry: RetryPolicy | None = None,
                 transport: httpx.BaseTransport | None = None,
                 event_queue_size: int = 10_000, event_batch_size: int = 500,
                 event_flush_interval: float = 1.0, event_retry_base: float = 0.5,
                 event_retry_cap: float = 30.0) -> None:
        self.agent = agent
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(
            base_url=url.rstrip("/"), timeout=timeout, transport=transport,
            verify=verifying_tls(),
            headers={"Authorization": f"Token {token}", "Accept": "application/json",
                     "User-Agent": f"agentgov-client/{VERSION}"})
        self._desired: dict[str, DesiredState] = {}
        # Told of every answer and failure, when a governed agent watches its link (the
        # adapters' gate refuses calls through it after a 401/403 or past the grace).
        self.link: ControlLink | None = None
        self._events = EventBatcher(
            self._post_events, max_queue=event_queue_size, batch_size=event_batch_size,
            flush_interval=event_flush_interval, retry_base=event_retry_base,
            retry_cap=event_retry_cap)

    @classmethod
    def from_env(cls, **options: Any) -> Client:
        """Configured by AGENTGOV_URL, AGENTGOV_TOKEN and (optionally) AGENTGOV_AGENT."""
        try:
            url, token = os.environ["AGENTGOV_URL"], os.environ["AGENTGOV_TOKEN"]
        except KeyError as missing:
            raise ValueError(f"set {missing.args[0]} in the environment") from None
        options.setdefault("agent", os.environ.get("AGENTGOV_AGENT") or None)
        return cls(url, token, **options)

    @property
    def base_url(self) -> str:
        """The control plane's address; settable, e.g. to move queued events to a replica."""
        return str(self._http.base_url).rstrip("/")

    @base_url.setter
    def base_url(self, url: str) -> None:
        self._http.base_url = url.rstrip("/")

    @property
    def events(self) -> EventBatcher:
        """The background sender of behaviour events: counters, flush, close."""
        return self._events

    def close(self, timeout: float = 10.0) -> None:
        """Send the events still queued (waiting up to `timeout`), then close connections."""
        self._events.close(timeout)
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the request core --------------------------------------------------------------------

    def request(self, method: str, path: str, *, idempotent: bool | None = None,
                retry: bool = True, **kwargs: Any) -> httpx.Response:
        """Send one request, retrying only what is safe to retry; raise the typed error of an
        error answer (any status >= 400), or Unreachable."""
        if idempotent is None:
            idempotent = method.upper() in IDEMPOTENT_METHODS
        attempt = 0
        while True:
            attempt += 1
            last_try = not retry or attempt >= self.retry.attempts
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError as error:
                safe = isinstance(error, NOT_SENT) or (idempotent and isinstance(error, MAYBE_SENT))
                if last_try or not safe:
                    unreachable = Unreachable(f"{method} {self.base_url}{path}: "
                                              f"{type(error).__name__}: {error}")
                    self._tell_link(unreachable)
                    raise unreachable from error
                delay = self.retry.delay(attempt)
            else:
                if response.status_code < 400:
                    if self.link is not None:
                        self.link.contact()
                    return response
                failure = error_from_response(response)
                safe = isinstance(failure, RateLimited) or (
                    idempotent and response.status_code in RETRY_STATUSES_IDEMPOTENT)
                if last_try or not safe:
                    self._tell_link(failure)
                    raise failure
                delay = self.retry.delay(attempt)
                if failure.retry_after is not None:
                    delay = min(failure.retry_after, self.retry.cap)
            time.sleep(delay)

    def _tell_link(self, error: Exception) -> None:
        if self.link is not None:
            self.link.failure(error)

    def _agent_path(self, agent: str | None, suffix: str) -> str:
        name = agent or self.agent
        if not name:
            raise ValueError("no agent: pass agent=... here or to Client(...)")
        return f"/api/v1/agents/{quote(name, safe='')}/{suffix}"

    def _pages(self, path: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        page = 1
        while True:
            body = self.request("GET", path, params={**params, "page": page,
                                                     "page_size": 500}).json()
            yield from body["results"]
            if not body.get("next"):
                return
            page += 1

    # --- for agents and their platforms -------------------------------------------------------

    def desired_state(self, agent: str | None = None, *, wait: float = 0.0,
                      retry: bool = True) -> DesiredState:
        """The effective desired state. Sends the last ETag: an unchanged state answers 304
        and the same (unparsed, cached) DesiredState object is returned. With `wait` (up to
        60 seconds) and a cached state, the control plane holds the request until the state
        changes (a suspension, a new generation) or the wait ends (a long-poll). `retry=False`
        asks once (a gate checking in before a call must not wait out the backoff)."""
        path = self._agent_path(agent, "desired-state")
        cached = self._desired.get(path)
        headers = {"If-None-Match": cached.etag} if cached and cached.etag else {}
        options: dict[str, Any] = {}
        if wait > 0 and headers:
            wait = min(wait, 60.0)
            timeout = self._http.timeout
            options = {"params": {"wait": f"{wait:g}"},
                       "timeout": httpx.Timeout(timeout.connect, read=(timeout.read or 0) + wait,
                                                write=timeout.write, pool=timeout.pool)}
        response = self.request("GET", path, headers=headers, retry=retry, **options)
        if response.status_code == 304 and cached is not None:
            return cached
        state = DesiredState.from_json(response.json(), response.headers.get("ETag", ""))
        self._desired[path] = state
        return state

    def report_observed(self, state: dict[str, Any], agent: str | None = None) -> Observation:
        """Report what the agent really runs with (the spec's keys minus enforcement, plus
        `running`). Safe to repeat: an unchanged state only counts as a heartbeat."""
        body = self.request("PUT", self._agent_path(agent, "observed-state"), json=state).json()
        return Observation(changed=body["changed"], sha256=body["sha256"],
                           observed_at=body["observed_at"])

    def report_observed_part(self, key: str, value: Any, agent: str | None = None
                             ) -> Observation:
        """Replace one key (`mcp_servers`) of the agent's latest observed state and keep the
        rest: for a reporter that sees one side of the agent, such as the MCP proxy."""
        body = self.request("PUT", self._agent_path(agent, "observed-state"),
                            params={"part": key}, json={key: value}).json()
        return Observation(changed=body["changed"], sha256=body["sha256"],
                           observed_at=body["observed_at"])

    def propose(self, spec: dict[str, Any], *, labels: dict[str, str] | None = None,
                description: str | None = None, base_generation: int | None = None,
                comment: str | None = None, agent: str | None = None) -> dict[str, Any]:
        """Propose a desired state (a human approves it); the outcome has the permission
        changes, the raw diff and every guardrail's verdict."""
        body = {"spec": spec, "labels": labels, "description": description,
                "base_generation": base_generation, "comment": comment}
        return self.request("POST", self._agent_path(agent, "proposals"),
                            json={k: v for k, v in body.items() if v is not None}).json()

    def record_event(self, kind: str, *, tool: str | None = None, resource: str | None = None,
                     record: str | None = None, action: str | None = None,
                     amount: float | None = None, approved_by: str | None = None,
                     decision_id: str | None = None, trace_id: str | None = None,
                     span_id: str | None = None, ts: datetime | str | None = None,
                     id: str | None = None, agent: str | None = None) -> str:
        """Queue one behaviour event for the background sender; returns its id (a uuid4
        unless given). Never blocks on the network."""
        if kind not in EVENT_KINDS:
            raise ValueError(f"kind must be one of {', '.join(EVENT_KINDS)}; got {kind!r}")
        name = agent or self.agent
        if not name:
            raise ValueError("no agent: pass agent=... here or to Client(...)")
        event = {"id": id or str(uuid.uuid4()), "agent": name, "ts": _timestamp(ts),
                 "kind": kind, "tool": tool, "resource": resource, "record": record,
                 "action": action, "amount": amount, "approved_by": approved_by,
                 "decision_id": decision_id, "trace_id": trace_id, "span_id": span_id}
        self._events.add({k: v for k, v in event.items() if v is not None})
        return event["id"]

    def tool_call(self, tool: str, **fields: Any) -> str:
        """Queue a tool_call event."""
        return self.record_event("tool_call", tool=tool, **fields)

    def data_access(self, resource: str, record: str | None = None, **fields: Any) -> str:
        """Queue a data_access event (one record of a resource, when known)."""
        return self.record_event("data_access", resource=resource, record=record, **fields)

    def action(self, action: str, amount: float | None = None,
               **fields: Any) -> str:
        """Queue an action event (with the decision_id that allowed it, if one did)."""
        return self.record_event("action", action=action, amount=amount, **fields)

    def flush_events(self, timeout: float | None = None) -> bool:
        """Wait until every event queued so far is answered; False if `timeout` ran out."""
        return self._events.flush(timeout)

    def send_events(self, events: list[dict[str, Any]]) -> EventsResult:
        """Send a batch now, in this thread (retried: the ids make a repeat harmless)."""
        return EventsResult.from_json(
            self.request("POST", "/api/v1/events", json=events, idempotent=True).json())

    def _post_events(self, events: list[dict[str, Any]]) -> EventsResult:
        # The batcher does its own backoff, so one attempt per call here.
        return EventsResult.from_json(
            self.request("POST", "/api/v1/events", json=events, idempotent=True,
                         retry=False).json())

    def decide(self, action: str | None = None, *, amount: float | str | None = None,
               tool: str | None = None, arguments: dict[str, Any] | None = None,
               resource: str | None = None, record: str | None = None,
               wait_seconds: float | None = None, callback_url: str | None = None,
               wait: float = 0.0, poll: float = 1.0, agent: str | None = None) -> Decision:
        """Ask whether the agent may do `action` (or run `tool` with `arguments`, exactly as
        the model produced them) now. The control plane reads any amount from `amount` or
        `arguments["amount"]` itself; a rule that needs one it cannot read answers deny.
        `wait_seconds` tells it how long this agent will wait for a human (a pending decision
        expires then); a pending answer is polled for up to `wait` seconds (`wait_seconds`
        when `wait` is not given), and one nobody answered is still pending, which `allowed`
        treats as no."""
        body = {"action": action, "amount": amount, "tool": tool, "arguments": arguments,
                "resource": resource, "record": record, "wait_seconds": wait_seconds,
                "callback_url": callback_url}
        # Not idempotent: each call makes a new decision, so only unsent requests are retried.
        response = self.request("POST", self._agent_path(agent, "decisions"),
                                json={k: v for k, v in body.items() if v is not None})
        decision = Decision.from_json(response.json())
        return self.wait_for_decision(decision, timeout=wait or (wait_seconds or 0.0),
                                      poll=poll)

    def decision(self, decision_id: str) -> Decision:
        """A decision as it stands now."""
        return Decision.from_json(
            self.request("GET", f"/api/v1/decisions/{quote(decision_id, safe='')}").json())

    def wait_for_decision(self, decision: Decision | str, *, timeout: float,
                          poll: float = 1.0) -> Decision:
        """Poll a pending decision until a human answers, it expires, or `timeout` passes."""
        if isinstance(decision, str):
            decision = self.decision(decision)
        deadline = time.monotonic() + timeout
        while decision.pending and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(poll, left))
            decision = self.decision(decision.id)
        return decision

    def watch(self, apply: Callable[[DesiredState], dict[str, Any] | None],
              **options: Any) -> DesiredState | None:
        """The sidecar loop; see `agentgov.sidecar.watch`."""
        from agentgov.sidecar import watch

        return watch(self, apply, **options)

    # --- for people (owners, approvers, compliance) -------------------------------------------

    def apply_manifests(self, text: str, *, dry_run: bool = False) -> dict[str, Any]:
        """Register agents / propose versions from YAML or JSON manifests (all or nothing)."""
        return self.request("POST", "/api/v1/manifests", content=text.encode("utf-8"),
                            params={"dry_run": "1"} if dry_run else None,
                            headers={"Content-Type": "application/yaml"}).json()

    def agents(self, **filters: str) -> Iterator[dict[str, Any]]:
        """Every agent (filters: status, owner, label="k=v", framework, q), page by page."""
        return self._pages("/api/v1/agents", filters)

    def get_agent(self, name: str) -> dict[str, Any]:
        """One agent with its conditions and active spec."""
        return self.request("GET", f"/api/v1/agents/{quote(name, safe='')}").json()

    def findings(self, **filters: str) -> Iterator[dict[str, Any]]:
        """Drift findings, newest first (filters: agent, status, severity, kind)."""
        return self._pages("/api/v1/findings", filters)

    def proposal(self, proposal_id: int) -> dict[str, Any]:
        return self.request("GET", f"/api/v1/proposals/{int(proposal_id)}").json()

    def approve(self, proposal_id: int, *, comment: str = "",
                expected_generation: int | None = None, otp: str = "") -> dict[str, Any]:
        """Approve a proposal (four eyes: never your own); returns the proposal after. `otp` is
        a current code from your authenticator when the proposal needs step-up."""
        body: dict[str, Any] = {"comment": comment}
        if expected_generation is not None:
            body["expected_generation"] = expected_generation
        if otp:
            body["otp"] = otp
        return self.request("POST", f"/api/v1/proposals/{int(proposal_id)}/approve",
                            json=body).json()

    def policy_tests(self, files: dict[str, str]) -> dict[str, Any]:
        """Run a policy folder's PolicyTest cases on the server's evaluator (what a policy
        commit meets); `files` maps paths relative to the folder to their text. Changes
        nothing on the server."""
        return self.request("POST", "/api/v1/policy-tests", idempotent=True,
                            json={"files": files}).json()

    def tokens(self) -> Iterator[dict[str, Any]]:
        """Your tokens and your agents' tokens (every token for an admin), newest first."""
        return self._pages("/api/v1/tokens", {})

    def revoke_token(self, token_id: int, *, reason: str = "") -> dict[str, Any]:
        """Revoke a token at once; requests with it get 401 from then on."""
        return self.request("POST", f"/api/v1/tokens/{int(token_id)}/revoke",
                            json={"reason": reason}).json()

    def audit_keys(self) -> list[dict[str, Any]]:
        """Every key that signed checkpoints, current and retired, in its published form."""
        return self.request("GET", "/api/v1/audit/keys").json()["keys"]

    def audit_verify(self) -> dict[str, Any]:
        """The server's own walk of the trail: ok, count, head_hash, first_broken_seq."""
        return self.request("GET", "/api/v1/audit/verify").json()

    def audit_newest_checkpoint(self) -> dict[str, Any] | None:
        """The newest signed tree head the server holds (None before the first)."""
        found = self.request("GET", "/api/v1/audit/checkpoints",
                             params={"page_size": 1}).json()["results"]
        return found[0] if found else None

    def audit_consistency_proof(self, first: int, second: int) -> list[str]:
        """The RFC 6962 proof (hex nodes) that the tree of `first` entries is a prefix of the
        tree of `second`."""
        return self.request("GET", "/api/v1/audit/proofs/consistency",
                            params={"first": first, "second": second}).json()["proof"]

    def audit_export(self, fmt: str = "jsonl") -> Iterator[bytes]:
        """The whole trail as JSONL or CSV, streamed in chunks (the export is audited too)."""
        try:
            with self._http.stream("GET", "/api/v1/audit/export",
                                   params={"format": fmt}) as response:
                if response.status_code >= 400:
                    response.read()
                    raise error_from_response(response)
                yield from response.iter_bytes()
        except httpx.TransportError as error:
            raise Unreachable(f"GET {self.base_url}/api/v1/audit/export: {error}") from error

