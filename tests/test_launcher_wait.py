"""`make demo`'s launcher waits for its web process as long as that process lives (a loaded
machine can take minutes; it used to give up after a fixed 60 s and stop everything), and gives
up, saying why and showing the web log, when the web process keeps dying without answering.
Run on a real supervisord with stand-in programs, the launcher's own config and wait."""

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from config import embedded_redis, launcher

SLOW_WEB = """
import socket, sys, time
print("warming up", flush=True)
time.sleep(float(sys.argv[2]))
server = socket.socket(); server.bind(("127.0.0.1", int(sys.argv[1]))); server.listen()
while True:
    server.accept()
"""
IDLE = [sys.executable, "-c", "import time; time.sleep(600)"]


@pytest.fixture
def var():
    """A short var/ (supervisord's unix socket path must fit in 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="launcher-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def supervised(var):
    """Start supervisord with the launcher's config for `programs`; stopped after the test."""
    started: list[subprocess.Popen] = []

    def start(port: int, web: list[str]):
        config = launcher.supervisor_config(var, port, None, programs={
            "web": web, "worker": IDLE, "cron": IDLE})
        process = subprocess.Popen([sys.executable, "-m", "supervisor.supervisord", "-c",
                                    str(config)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.STDOUT)
        started.append(process)
        deadline = time.monotonic() + 60
        while not (var / "supervisor.sock").exists():
            assert process.poll() is None and time.monotonic() < deadline, "no supervisord"
            time.sleep(0.1)
        rpc = launcher.supervisor_rpc(config)
        rpc.supervisor.startAllProcesses(False)
        return process, rpc

    yield start
    for process in started:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


class FastClock:
    """`time` as the launcher reads it, with its clock running SPEED times faster than the
    machine's: a web process warming up for 4 s keeps the launcher waiting for 80 s by that
    clock, past the minute the launcher used to give up after."""

    SPEED = 20

    def __init__(self) -> None:
        self.start = time.monotonic()

    def monotonic(self) -> float:
        return self.start + (time.monotonic() - self.start) * self.SPEED

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(seconds)


def test_it_waits_past_a_minute_for_a_web_process_that_is_alive(supervised, var, capsys,
                                                                  monkeypatch):
    clock = FastClock()
    monkeypatch.setattr(launcher, "time", clock)
    port = embedded_redis.free_port()
    script = var / "slow_web.py"  # a file: supervisord's command is one line
    script.write_text(SLOW_WEB)
    supervisor, rpc = supervised(port, [sys.executable, str(script), str(port), "4"])
    began = clock.monotonic()
    assert launcher.wait_for_web(port, supervisor, rpc, var / "logs", lambda: False)
    assert clock.monotonic() - began > 65
    said = capsys.readouterr().out
    assert said.count("still waiting for the web process to answer") >= 3  # every 15 s
    assert "warming up" in (var / "logs" / "web.log").read_text()  # its log, in var/logs


def test_it_gives_up_on_a_web_process_that_keeps_dying_and_shows_its_log(supervised, var,
                                                                        capsys):
    port = embedded_redis.free_port()
    crash = [sys.executable, "-c", "import sys; print('no such settings module'); sys.exit(3)"]
    supervisor, rpc = supervised(port, crash)
    assert not launcher.wait_for_web(port, supervisor, rpc, var / "logs", lambda: False)
    said = capsys.readouterr().out
    assert "The web process died 3 times before it answered" in said
    assert "no such settings module" in said
    assert supervisor.poll() is None  # the launcher decides; supervisord is stopped by it


def test_the_url_and_the_logins_come_last():
    text = launcher.ready_text("http://127.0.0.1:8123/", "  alice  pw  owner\n  bob  pw2  approver",
                               launcher.BASE_DIR / "var" / "supervisord.conf",
                               launcher.BASE_DIR / "var" / "logs")
    lines = text.rstrip().splitlines()
    assert lines[-3:] == ["Demo logins (user, password, role):", "  alice  pw  owner",
                          "  bob  pw2  approver"]
    assert lines[-5] == "Agent governance is running at http://127.0.0.1:8123/"
    assert f"    tail -f {launcher.BASE_DIR / 'var' / 'logs'}/*.log" in lines
    assert "mail/" not in text


def test_the_demo_says_where_its_mail_is_read():
    text = launcher.ready_text("http://127.0.0.1:8123/", "  dana  pw  compliance",
                               launcher.BASE_DIR / "var" / "supervisord.conf",
                               launcher.BASE_DIR / "var" / "logs", mail_sink=True)
    assert ("Email it sends (no mail server here) is read at http://127.0.0.1:8123/mail/ by "
            "compliance and admin logins.") in text.splitlines()
    assert text.rstrip().splitlines()[-1] == "  dana  pw  compliance"
