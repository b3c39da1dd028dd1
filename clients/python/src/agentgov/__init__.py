"""The agent-side client of the agent governance control plane (no Django needed).

`Client` and `RetryPolicy` load with their module when first used (PEP 562): the control
plane imports this package for the audit trail's formats in every process it starts, and the
HTTP client's module brings httpx (and the rich console httpx loads when installed), ~50-90 ms
of each such start for nothing (bench/RESULTS.md)."""

from typing import TYPE_CHECKING

from agentgov.audit import TrailCheck, verify_file
from agentgov.errors import (
    AgentGovError,
    ApiError,
    BadRequest,
    Conflict,
    ErrorDetail,
    Forbidden,
    Invalid,
    NotFound,
    RateLimited,
    ServerError,
    TooLarge,
    Unauthenticated,
    Unreachable,
)
from agentgov.events import EventBatcher
from agentgov.platform import verify_request
from agentgov.responses import Decision, DesiredState, EventsResult, Observation
from agentgov.sidecar import watch
from agentgov.version import VERSION as __version__
from agentgov.webhooks import BadSignature
from agentgov.webhooks import verify as verify_webhook

if TYPE_CHECKING:  # what type checkers and editors see
    from agentgov.client import Client, RetryPolicy

__all__ = [
    "AgentGovError", "ApiError", "BadRequest", "BadSignature", "Client", "Conflict", "Decision",
    "DesiredState", "ErrorDetail", "EventBatcher", "EventsResult", "Forbidden", "Invalid",
    "NotFound", "Observation", "RateLimited", "RetryPolicy", "ServerError", "TooLarge",
    "TrailCheck", "Unauthenticated", "Unreachable", "__version__", "verify_file",
    "verify_request", "verify_webhook", "watch",
]

_FROM_CLIENT = ("Client", "RetryPolicy")  # the names of agentgov.client, the one module on httpx


def __getattr__(name: str):
    if name not in _FROM_CLIENT:
        raise AttributeError(f"module 'agentgov' has no attribute {name!r}")
    from agentgov import client  # on first use: it imports httpx

    globals().update({each: getattr(client, each) for each in _FROM_CLIENT})
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
