"""`make example` (examples/run_example.py) finds the running demo by itself, on whatever port
it runs, and revokes every API token it made when it ends: after the agent finishes, when a
step fails, and when it is stopped."""

import json
import os
import signal
import subprocess
import sys

from django.conf import settings

from registry.models import Agent, ApiToken
from tests.conftest import ROOT, child_env, eventually

RUNNER = ROOT / "examples" / "run_example.py"


def runner_env(var_dir, **extra: str) -> dict[str, str]:
    """The runner in its own var/ (where it looks for demo.json), with the test's database,
    Redis and keys, so its manage.py commands act on the demo under test."""
    env = child_env(VAR_DIR=str(var_dir), SECRET_KEY=settings.SECRET_KEY,
                    AUDIT_SIGNING_KEY=settings.AUDIT_SIGNING_KEY,
                    AUDIT_PRIVATE_KEY_FILE=settings.AUDIT_PRIVATE_KEY_FILE,
                    REFUND_AGENT_STATE=str(var_dir / "deployment.json"), **extra)
    env.pop("AGENTGOV_URL", None)
    return env


def announce(var_dir, url: str, pid: int) -> None:
    """What the launcher writes while the demo runs."""
    var_dir.mkdir(parents=True, exist_ok=True)
    (var_dir / "demo.json").write_text(json.dumps({"url": url, "pid": pid}))


def run(var_dir, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RUNNER), *args], cwd=ROOT, env=runner_env(var_dir),
                          capture_output=True, text=True, timeout=timeout)


def live_tokens() -> list[str]:
    return list(ApiToken.objects.filter(revoked_at__isnull=True, name__startswith="refund-bot")
                .values_list("name", flat=True))


def test_it_finds_the_demo_on_its_port_and_revokes_its_tokens(people, live_server_process,
                                                             redis_client, tmp_path):
    var = tmp_path / "var"
    announce(var, live_server_process.url + "/", live_server_process.process.pid)
    done = run(var, "--orders", "3", "--pause", "0.1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Using the control plane at {live_server_process.url}" in done.stdout
    agent = Agent.objects.get(name="refund-bot")
    assert agent.events.filter(kind="action").count() == 1  # its one refund, reported
    made = ApiToken.objects.filter(name__startswith="refund-bot")
    assert made.count() == 3  # alice's, bob's and the agent's
    assert live_tokens() == []
    assert "Revoked the 3 API token(s)" in done.stdout


def test_without_a_running_demo_it_says_so_and_makes_nothing(people, tmp_path):
    var = tmp_path / "var"
    missing = run(var, timeout=60)
    assert missing.returncode == 2
    assert "no demo is running" in missing.stderr and "make demo" in missing.stderr
    assert "Traceback" not in missing.stderr
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    announce(var, "http://127.0.0.1:9/", gone.pid)  # a demo that has stopped
    stale = run(var, timeout=60)
    assert stale.returncode == 2 and "is gone" in stale.stderr, stale.stderr
    assert "Traceback" not in stale.stderr
    assert not ApiToken.objects.filter(name__startswith="refund-bot").exists()


def test_a_failing_step_still_revokes_what_it_made(people, live_server_process, redis_client,
                                                  tmp_path):
    var = tmp_path / "var"
    announce(var, live_server_process.url, live_server_process.process.pid)
    failed = run(var, "--orders", "not-a-number")  # the agent refuses its options
    assert failed.returncode != 0
    assert ApiToken.objects.filter(name__startswith="refund-bot").count() == 3
    assert live_tokens() == [], failed.stdout + failed.stderr


def test_stopping_it_stops_the_agent_and_revokes_its_tokens(people, live_server_process,
                                                            redis_client, tmp_path):
    var = tmp_path / "var"
    announce(var, live_server_process.url, live_server_process.process.pid)
    log = tmp_path / "runner.log"
    with open(log, "w") as output:
        runner = subprocess.Popen([sys.executable, str(RUNNER), "--pause", "0.2"], cwd=ROOT,
                                  env=runner_env(var), stdout=output, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        try:
            eventually(lambda: Agent.objects.filter(name="refund-bot",
                                                    events__kind="tool_call").exists(),
                       timeout=120, message=log.read_text)
            assert live_tokens() != []
            runner.send_signal(signal.SIGTERM)
            runner.wait(timeout=60)
        finally:
            if runner.poll() is None:
                os.killpg(runner.pid, signal.SIGKILL)
                runner.wait(timeout=15)
    assert live_tokens() == [], log.read_text()
    assert ApiToken.objects.filter(name__startswith="refund-bot").count() == 3
