"""The sidecar loop: keep an agent on its desired state and tell the control plane so.

With the push connector the control plane corrects an agent by publishing the desired state
and waiting for the agent's next report; this loop is what makes those corrections land."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentgov.errors import AgentGovError, Forbidden, NotFound, Unauthenticated
from agentgov.responses import DesiredState

if TYPE_CHECKING:
    from agentgov.client import Client

log = logging.getLogger("agentgov.sidecar")

State = dict[str, Any]


def watch(client: Client, apply: Callable[[DesiredState], State | None], *,
          observe: Callable[[], State] | None = None, interval: float = 5.0,
          iterations: int | None = None, stop: threading.Event | None = None,
          restore_drift: bool = True, agent: str | None = None,
          long_poll: bool = True) -> DesiredState | None:
    """Pull the desired state every `interval` seconds (a 304 when unchanged) and:

    - when it changed (a new generation, an expired grant, a suspension: anything that
      changes its sha256; and always on the first pull), call `apply(desired)`, then report
      the resulting observed state: `observe()` if given, else what `apply` returned, else
      `desired.as_observed()`. `desired.running` False means stop the agent.
    - otherwise, if `observe` is given, compare the agent's actual state with the one
      reported after the last apply; if it moved (drift from outside), report it so the
      control plane records it and, with `restore_drift`, apply the desired state again and
      report the result. Set `restore_drift=False` where a human should decide about drift
      (enforcement `escalate` or `log`): the agent then changes only when its desired state
      does.

    With `long_poll` (the default) each pull after the first is held by the control plane
    for up to `interval` seconds and answered as soon as the desired state changes, so a
    suspension or a correction lands within moments instead of at the next tick; a control
    plane that answers at once anyway (an older one, or one served by WSGI) is pulled every
    `interval` seconds as before.

    `apply` should be idempotent. Its failures (and `observe`'s, and the control plane's) are
    logged and tried again on the next tick, except a refused token (401, 403), which is
    raised. Runs until `stop` is set or for `iterations` ticks; returns the desired state
    last applied."""
    stop = stop or threading.Event()
    applied: DesiredState | None = None
    reported: State | None = None
    ticks = 0

    def owners(function: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
        # The owner's callbacks may fail in any way; the loop must survive them.
        try:
            return True, function(*args)
        except Exception:
            name = getattr(function, "__name__", "the callback")
            log.exception("%s failed; trying again in %ss", name, interval)
            return False, None

    while not stop.is_set():
        started, failed, previous = time.monotonic(), False, applied
        try:
            held = interval if long_poll and applied is not None else 0.0
            desired = client.desired_state(agent, wait=held)
            if stop.is_set():  # stopped while the pull was held: its answer is not applied
                break
            if observe is not None and applied is not None and desired.sha256 == applied.sha256:
                ok, actual = owners(observe)
                if ok and actual != reported:
                    log.warning("%s drifted from its desired state", desired.agent)
                    client.report_observed(actual, agent)
                    reported = actual
                    if restore_drift:
                        applied = None  # apply it again now
            if applied is None or desired.sha256 != applied.sha256:
                log.info("applying %s generation %s", desired.agent, desired.generation)
                ok, result = owners(apply, desired)
                if ok and observe is not None:
                    ok, result = owners(observe)
                if ok:
                    state = result if isinstance(result, dict) else desired.as_observed()
                    client.report_observed(state, agent)
                    reported, applied = state, desired
        except (Unauthenticated, Forbidden):
            raise
        except NotFound as error:
            failed = True
            log.info("no desired state yet: %s", error.message)
        except AgentGovError as error:
            failed = True
            log.warning("control plane: %s; trying again in %ss", error, interval)
        ticks += 1
        if iterations is not None and ticks >= iterations:
            break
        # A held pull already waited; one answered early (a change, or a server that does
        # not hold) waits out the rest of the tick, unless the state changed.
        if failed or applied is previous:
            stop.wait(interval if failed or not long_poll
                      else max(0.0, interval - (time.monotonic() - started)))
    return applied
