"""The agent-side client of the agent governance control plane (no Django needed)."""

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
from agentgov.version import VERSION as __version__
from agentgov.webhooks import BadSignature
from agentgov.webhooks import verify as verify_webhook

__all__ = [
    "AgentGovError", "ApiError", "BadRequest", "BadSignature", "Client", "Conflict", "Decision",
    "DesiredState", "ErrorDetail", "EventBatcher", "EventsResult", "Forbidden", "Invalid",
    "NotFound", "Observation", "RateLimited", "RetryPolicy", "ServerError", "TooLarge",
    "TrailCheck", "Unauthenticated", "Unreachable", "__version__", "verify_file",
    "verify_request", "verify_webhook", "watch",
]
