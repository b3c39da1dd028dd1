"""The agent-side client of the agent governance control plane (no Django needed).

Its names are loaded when first used (PEP 562): the control plane imports this package for the
audit trail's formats (agentgov.entries, .merkle, .checkpoints) in every process it starts, and
the HTTP client's modules (httpx, and the rich console httpx brings when installed) cost ~50-90
ms of each such start for nothing (bench/RESULTS.md)."""

from importlib import import_module
from typing import TYPE_CHECKING

from agentgov.version import VERSION as __version__

# Each public name and the module that holds it.
_WHERE = {
    "TrailCheck": "agentgov.audit", "verify_file": "agentgov.audit",
    "Client": "agentgov.client", "RetryPolicy": "agentgov.client",
    **dict.fromkeys(("AgentGovError", "ApiError", "BadRequest", "Conflict", "ErrorDetail",
                     "Forbidden", "Invalid", "NotFound", "RateLimited", "ServerError",
                     "TooLarge", "Unauthenticated", "Unreachable"), "agentgov.errors"),
    "EventBatcher": "agentgov.events",
    "verify_request": "agentgov.platform",
    **dict.fromkeys(("Decision", "DesiredState", "EventsResult", "Observation"),
                    "agentgov.responses"),
    "watch": "agentgov.sidecar",
    "BadSignature": "agentgov.webhooks",
}
_RENAMED = {"verify_webhook": ("agentgov.webhooks", "verify")}

__all__ = [
    "AgentGovError", "ApiError", "BadRequest", "BadSignature", "Client", "Conflict", "Decision",
    "DesiredState", "ErrorDetail", "EventBatcher", "EventsResult", "Forbidden", "Invalid",
    "NotFound", "Observation", "RateLimited", "RetryPolicy", "ServerError", "TooLarge",
    "TrailCheck", "Unauthenticated", "Unreachable", "__version__", "verify_file",
    "verify_request", "verify_webhook", "watch",
]


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(import_module(_WHERE[name]), name)
    elif name in _RENAMED:
        module, attribute = _RENAMED[name]
        value = getattr(import_module(module), attribute)
    else:
        raise AttributeError(f"module 'agentgov' has no attribute {name!r}")
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what type checkers and editors see: the same names, imported
    from agentgov.audit import TrailCheck, verify_file
    from agentgov.client import Client, RetryPolicy
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
    from agentgov.webhooks import BadSignature
    from agentgov.webhooks import verify as verify_webhook
