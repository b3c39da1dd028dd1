"""A web process told to stop ends within WEB_STOP_GRACE_SECONDS, whatever its requests'
threads do.

On SIGTERM daphne cancels the requests in flight and waits for them before it stops its event
loop; a request's thread in Django's sync code runs on regardless. One still working (a view
waiting on a lock) kept the server from stopping for as long as it worked; one whose client
had left was let go and, once the loop had stopped, handed its view to a loop that would never
run again and waited for ever, and Python's exit waits for it (a supervisor's stop or a
rolling restart waited for its SIGKILL; a test's server was left on its database). Their
responses were already abandoned, and what they had not committed is rolled back when the
process ends."""

import logging
import os
import sys
import threading

from django.conf import settings

log = logging.getLogger(__name__)


def end_when_the_server_stops() -> None:
    """Under daphne (Twisted's reactor installed), end the process WEB_STOP_GRACE_SECONDS after
    the reactor begins to shut down, if it has not ended by then; under any other ASGI
    server, nothing."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is not None:
        reactor.addSystemEventTrigger("before", "shutdown", _end_after_grace)


def _end_after_grace() -> None:
    grace = settings.WEB_STOP_GRACE_SECONDS
    timer = threading.Timer(grace, _end, args=(grace,))
    timer.daemon = True  # the process ending by itself first is the usual case
    timer.start()


def _end(grace: float) -> None:
    waiting = [t.name for t in threading.enumerate()
               if t is not threading.current_thread() and t is not threading.main_thread()
               and not t.daemon]
    log.warning("told to stop %.0f s ago, %d request thread(s) still running or waiting "
                "(%s): ending the process", grace, len(waiting),
                ", ".join(waiting))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
