"""Whether a governed agent may still act: the state of its link to the control plane.

Every answer the client gets feeds this one object, and every gate asks it before a call:

- a 401 or 403 (the token revoked, the agent retired, the token acting for another agent)
  stops every governed call at once and for good: nothing the agent does can be governed
  any more, so nothing it does runs;
- an unreachable control plane (connection refused, timeout, a 5xx answer) is tolerated for
  `fail_open_seconds` after the last successful contact (default 0: not at all), then calls
  are refused, except the owner's `read_only_tools`, which keep running while the control
  plane is unreachable (never after a 401/403);
- any answer below 500 other than 401/403 is contact: the control plane is there.

The MCP proxy keeps the same names and semantics (`fail_open_seconds`,
`AGENTGOV_FAIL_OPEN_SECONDS`, `read_only_tools`)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable

from agentgov.errors import AgentGovError, ApiError, Forbidden, Unauthenticated

log = logging.getLogger("agentgov.control_link")

FAIL_OPEN_ENV = "AGENTGOV_FAIL_OPEN_SECONDS"


def fail_open_seconds_from_env(default: float = 0.0) -> float:
    """AGENTGOV_FAIL_OPEN_SECONDS as a finite, non-negative number of seconds (loudly)."""
    text = os.environ.get(FAIL_OPEN_ENV, "").strip()
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"{FAIL_OPEN_ENV} must be a number of seconds; got {text!r}") from None
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"{FAIL_OPEN_ENV} must be 0 or more seconds; got {text!r}")
    return seconds


def is_lost_credentials(error: BaseException) -> bool:
    """A 401/403: the control plane no longer lets this token act."""
    return isinstance(error, Unauthenticated | Forbidden)


def is_unreachable(error: BaseException) -> bool:
    """No usable answer: refused, timed out, dropped, or a 5xx."""
    if isinstance(error, ApiError):
        return error.status >= 500
    return isinstance(error, AgentGovError)


class ControlLink:
    """The agent's link to its control plane, fed by every request the client makes."""

    def __init__(self, *, fail_open_seconds: float | None = None,
                 read_only_tools: Iterable[str] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        grace = fail_open_seconds_from_env() if fail_open_seconds is None else fail_open_seconds
        if not 0 <= grace < float("inf"):
            raise ValueError(f"fail_open_seconds must be 0 or more; got {grace!r}")
        self.fail_open_seconds = float(grace)
        self.read_only_tools = frozenset(read_only_tools)
        self._clock = clock
        self._lock = threading.Lock()
        self.last_contact = clock()  # start-up counts: the agent was just configured
        self.lost: str | None = None  # why the credentials were refused (sticky)
        self.unreachable: str | None = None  # the latest failure, while failing

    def contact(self) -> None:
        """The control plane answered (anything but a 401/403 or a 5xx)."""
        with self._lock:
            self.last_contact = self._clock()
            self.unreachable = None

    def failure(self, error: BaseException) -> None:
        """A request failed: a 401/403 stops the agent; unreachable starts the grace."""
        with self._lock:
            if is_lost_credentials(error):
                if self.lost is None:
                    log.error("the control plane refused the agent's token (%s): every "
                              "governed call is refused from now on", error)
                self.lost = str(error)
            elif is_unreachable(error):
                if self.unreachable is None:
                    log.warning("the control plane is unreachable (%s); governed calls are "
                                "refused %ss after the last contact", error,
                                self.fail_open_seconds)
                self.unreachable = str(error)
            else:
                self.last_contact = self._clock()
                self.unreachable = None

    def refusal(self, tool: str) -> str | None:
        """Why `tool` may not run now because of the link, or None when it may."""
        with self._lock:
            if self.lost is not None:
                return (f"the control plane refused this agent's credentials ({self.lost}); "
                        "every governed call is stopped")
            if self.unreachable is None:
                return None
            down = self._clock() - self.last_contact
            if down <= self.fail_open_seconds or tool in self.read_only_tools:
                return None
            return (f"the control plane has been unreachable for {down:.0f}s (the grace is "
                    f"{self.fail_open_seconds:g}s): {self.unreachable}")

    @property
    def stopped(self) -> bool:
        """True once the credentials were refused: nothing governed runs again."""
        return self.lost is not None
