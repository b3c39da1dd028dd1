"""Domain errors raised by actions; the API turns each into its documented JSON error."""

from typing import Any


class DomainError(Exception):
    """A refused operation: nothing was changed. `status` is the HTTP status the API answers."""

    status = 400
    code = "malformed"

    def __init__(self, message: str, *, code: str | None = None,
                 details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []
        if code:
            self.code = code


class Malformed(DomainError):
    """The body is not parseable (not UTF-8, not YAML or JSON)."""


class NotAllowed(DomainError):
    """The principal may not do this (wrong role, not the owner, four-eyes)."""

    status, code = 403, "forbidden"


class NotFound(DomainError):
    """The named object does not exist (or is not visible to the principal)."""

    status, code = 404, "not_found"


class Conflict(DomainError):
    """The request is stale or clashes with the current state (e.g. a stale generation)."""

    status, code = 409, "conflict"


class Invalid(DomainError):
    """The content is well-formed but not acceptable (invalid spec, guardrail denial)."""

    status, code = 422, "invalid"


class TooLarge(DomainError):
    """The body is over a size or count limit."""

    status, code = 413, "too_large"


class Unavailable(DomainError):
    """A part the request needs (the work queue) is down; retry later."""

    status, code = 503, "unavailable"
