"""A web process told to stop (SIGTERM: a supervisor's stop, a rolling restart) ends, even with
a request's thread still in Django's sync code: one whose client left, or one that never
finishes (config/web_shutdown.py)."""

import signal
import socket
import subprocess
import sys

import pytest

from config import embedded_redis
from tests.conftest import ROOT, child_env, eventually

# daphne, with /healthz held in the outermost middleware (before the view's hand-off to the
# event loop) until the file `go` appears; `in` says a request is held.
HELD_SERVER = """
import pathlib, sys, time
from config import process_role
process_role.role = process_role.WEB
import django
django.setup()
from config import observability
held = pathlib.Path(sys.argv[1])
answer = observability.RequestMetricsMiddleware.__call__
def hold(self, request):
    if request.path == "/healthz":
        (held / "in").touch()
        while not (held / "go").exists():
            time.sleep(0.05)
    return answer(self, request)
observability.RequestMetricsMiddleware.__call__ = hold
from daphne.cli import CommandLineInterface
CommandLineInterface().run(["-b", "127.0.0.1", "-p", sys.argv[2], "config.asgi:application"])
"""


# The grace: the default, or the one the deployment set (WEB_STOP_GRACE_SECONDS).
@pytest.mark.parametrize("client_leaves, grace", [(True, None), (False, "2")],
                         ids=["client_left", "client_waits"])
@pytest.mark.django_db  # the server's database exists; it reads nothing of the test's
def test_a_web_process_told_to_stop_mid_request_ends(tmp_path, client_leaves, grace):
    port = embedded_redis.free_port()
    log = tmp_path / "daphne.log"
    env = child_env(**({"WEB_STOP_GRACE_SECONDS": grace} if grace else {}))
    with open(log, "w") as output:
        server = subprocess.Popen([sys.executable, "-c", HELD_SERVER, str(tmp_path), str(port)],
                                  cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
    client = None
    try:
        eventually(lambda: embedded_redis.port_answers("127.0.0.1", port)
                   or server.poll() is not None, timeout=90, message="daphne did not start")
        assert server.poll() is None, log.read_text()
        client = socket.create_connection(("127.0.0.1", port), timeout=30)
        client.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        eventually(lambda: (tmp_path / "in").exists(), timeout=60,
                   message="the request was never held")
        if client_leaves:
            # A browser closed while its request is still in the middleware; then the server
            # is told to stop: it lets the request go and its event loop ends (it stops
            # listening); only then does the request go on, to hand its view to a loop that
            # is gone.
            client.close()
            server.send_signal(signal.SIGTERM)
            eventually(lambda: not embedded_redis.port_answers("127.0.0.1", port), timeout=60,
                       message="the web process kept listening after SIGTERM")
            (tmp_path / "go").touch()
        else:
            # The client waits and the request never finishes (a view stuck on a lock): the
            # server waits for it, but not for ever.
            server.send_signal(signal.SIGTERM)
        try:
            assert server.wait(timeout=60) == 0
        except subprocess.TimeoutExpired:
            pytest.fail("the web process did not end within 60 s of SIGTERM")
        # and says why it ended that way
        assert f"told to stop {grace or 5} s ago, 1 request thread(s) still running or " \
               "waiting" in log.read_text(), log.read_text()
    finally:
        if client is not None:
            client.close()
        if server.poll() is None:
            server.kill()
            server.wait(timeout=15)
