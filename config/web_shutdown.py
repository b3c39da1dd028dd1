"""A web process ends once its server has stopped, even with a request caught half-way.

On SIGTERM daphne cancels the requests in flight and stops its event loop. A request whose
thread was still in the sync middleware at that moment goes on, reaches the view's hand-off
to the event loop, and waits there for a loop that will never run again; Python's exit waits
for that thread, so the process never ended (a supervisor's stop or a rolling restart waited
for its SIGKILL, and a test's server was left on its database). Once the server has stopped,
such threads get EXIT_GRACE_SECONDS to end on their own, and then the process ends."""

import logging
import os
import sys
import threading

EXIT_GRACE_SECONDS = 5.0

log = logging.getLogger(__name__)


def end_when_the_server_stops() -> None:
    """Under daphne (Twisted's reactor installed), end the process EXIT_GRACE_SECONDS after
    the reactor has shut down; under any other ASGI server, nothing."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is not None:
        reactor.addSystemEventTrigger("after", "shutdown", _end_after_grace)


def _end_after_grace() -> None:
    timer = threading.Timer(EXIT_GRACE_SECONDS, _end)
    timer.daemon = True  # the process ending by itself first is the usual case
    timer.start()


def _end() -> None:
    waiting = [t.name for t in threading.enumerate()
               if t is not threading.current_thread() and t is not threading.main_thread()
               and not t.daemon]
    log.warning("the server stopped %.0f s ago and %d request thread(s) still wait on it "
                "(%s): ending the process", EXIT_GRACE_SECONDS, len(waiting),
                ", ".join(waiting))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
