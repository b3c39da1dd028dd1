"""Typed errors. An `ApiError` carries the control plane's JSON error document
(`{"error": {"code", "message", "details": [{"pointer", "message", ...}]}}`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the control plane imports these errors without httpx
    import httpx


class AgentGovError(Exception):
    """Anything this client raises."""


class Unreachable(AgentGovError):
    """No answer from the control plane (refused, timed out, connection dropped)."""


@dataclass(frozen=True)
class ErrorDetail:
    """One problem of an error, with the JSON pointer of what it is about."""

    pointer: str
    message: str
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. "line" for a manifest


class ApiError(AgentGovError):
    """The control plane answered with an error status."""

    def __init__(self, status: int, code: str, message: str,
                 details: list[ErrorDetail] | None = None, *,
                 retry_after: float | None = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []
        self.retry_after = retry_after
        super().__init__(f"{status} {code}: {message}")

    @property
    def pointers(self) -> list[str]:
        """The JSON pointers the error names, in order."""
        return [d.pointer for d in self.details]


class BadRequest(ApiError):
    """400: the request is malformed."""


class Unauthenticated(ApiError):
    """401: no token, or a wrong, expired or revoked one."""


class Forbidden(ApiError):
    """403: the token may not do this."""


class NotFound(ApiError):
    """404: no such agent, proposal or decision (or no approved desired state yet)."""


class Conflict(ApiError):
    """409: a conflict, e.g. a stale generation."""


class TooLarge(ApiError):
    """413: the body is over the server's limit."""


class Invalid(ApiError):
    """422: an invalid spec or observed state, or a guardrail's denial."""


class RateLimited(ApiError):
    """429: too many requests; `retry_after` says when to come back, if the server said."""


class ServerError(ApiError):
    """5xx: the control plane failed or is unavailable."""


BY_STATUS: dict[int, type[ApiError]] = {400: BadRequest, 401: Unauthenticated, 403: Forbidden,
                                        404: NotFound, 409: Conflict, 413: TooLarge,
                                        422: Invalid, 429: RateLimited}


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds (only the delta-seconds form)."""
    try:
        return max(0.0, float(response.headers["Retry-After"]))
    except (KeyError, ValueError):
        return None


def error_from_response(response: httpx.Response) -> ApiError:
    """The typed error for an error response, from its JSON document when it has one."""
    status = response.status_code
    try:
        document = response.json()["error"]
        code, message = str(document["code"]), str(document["message"])
        details = [ErrorDetail(str(d.get("pointer", "")), str(d.get("message", "")),
                               {k: v for k, v in d.items() if k not in ("pointer", "message")})
                   for d in document.get("details") or []]
    except (ValueError, KeyError, TypeError, AttributeError):
        code = f"http_{status}"
        message = response.text[:500] or response.reason_phrase
        details = []
    kind = BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return kind(status, code, message, details, retry_after=retry_after_seconds(response))
