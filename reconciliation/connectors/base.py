"""What every connector offers, and how it fails."""

from enum import StrEnum
from typing import Any, Protocol

from registry.models import Agent


class ConnectorError(RuntimeError):
    """The platform refused or could not be reached; the pass fails and is retried.

    `str()` is what people are shown; `detail` (what really happened, which could map the
    network behind the control plane) is for the log only.
    """

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message


class CorrectionRefused(ConnectorError):
    """The change cannot be made safely, or the connector may not make it: a human decides.

    The pass escalates the finding instead of retrying (a role shared with other agents, a
    grant to PUBLIC, credentials without the privilege the change needs). `str()` is shown.
    """


class SimulatedCrash(BaseException):  # noqa: N818 (it is not an error a handler should catch)
    """The sandbox's injected crash: like a worker dying, nothing after it runs."""


class ApplyOutcome(StrEnum):
    APPLIED = "applied"  # the platform made the change now
    DUPLICATE = "duplicate"  # the platform had already made the change under this key
    PUBLISHED = "published"  # push: the agent will pull the change and report back


class Connector(Protocol):
    """Reads an agent's actual state and applies keyed changes to it."""

    name: str

    def observe(self, agent: Agent) -> dict[str, Any] | None:
        """The agent's actual state now, bypassing any cache of ours (None: never seen)."""

    def apply(self, agent: Agent, operation: dict[str, Any], key: str) -> ApplyOutcome:
        """Apply one change; a repeated key must be treated as already done."""
