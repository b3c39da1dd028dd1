"""Scale-out: two web processes and three workers against one database and one Redis, with
triggers arriving at all of them: every agent converges, and no agent ever has two passes at
once."""

import signal
import subprocess
import sys
import urllib.request

import pytest

from config import embedded_redis
from reconciliation.models import Finding, ReconcileRun
from registry import actions as registry_actions
from registry.models import Agent
from sandbox import actions
from sandbox.models import SandboxAgent
from tests.conftest import (
    BAD_DEPLOYMENT,
    ROOT,
    approved_agent,
    assert_trail_whole,
    child_env,
    eventually,
)

AGENTS = 8


def web_process():
    port = embedded_redis.free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
         "config.asgi:application"], cwd=ROOT, env=child_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    eventually(lambda: embedded_redis.port_answers("127.0.0.1", port), timeout=90)
    return process, f"http://127.0.0.1:{port}"


@pytest.mark.timeout(240)
def test_two_web_processes_and_three_workers_converge_everything_one_pass_at_a_time(
        people, start_worker, settings):
    settings.BREAKER_SHARE_PERCENT = 100  # drifting every agent at once on purpose
    agents = [approved_agent(people, f"scale-{index}", enforcement={"default": "correct"})
              for index in range(AGENTS)]
    _, key = registry_actions.issue_api_token(people.dana, actor=people.dana)
    webs = [web_process() for _ in range(2)]
    workers = [start_worker("reconcile", "ingest", "default", BREAKER_SHARE_PERCENT="100")
               for _ in range(3)]
    try:
        eventually(lambda: Agent.objects.filter(status__health="in_policy").count() == AGENTS,
                   timeout=90, message=workers[0].output())
        for round_ in range(2):
            for agent in agents:
                actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                       reason=f"round {round_}")
                for _, base in webs:  # the same trigger reaches both web processes
                    request = urllib.request.Request(
                        f"{base}/api/v1/agents/{agent.name}/reconcile", method="POST",
                        headers={"Authorization": f"Token {key}"})
                    with urllib.request.urlopen(request, timeout=10) as response:
                        assert response.status == 202
            applied = 3 * (round_ + 1)
            # Round 1's end state already holds before round 2's drift is seen: wait until
            # this round's changes have all been applied too.
            eventually(lambda applied=applied: Agent.objects.filter(
                           status__health="in_policy").count() == AGENTS
                       and not Finding.objects.exclude(status="corrected").exists()
                       and all(SandboxAgent.objects.get(agent=agent).apply_count
                               == applied for agent in agents),
                       timeout=120, message=workers[0].output())
    finally:
        for process, _ in webs:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)
    for agent in agents:
        assert agent.sandbox.apply_count == 6  # 3 changes, twice: none applied twice
        runs = sorted(ReconcileRun.objects.filter(agent=agent).values_list(
            "started_at", "duration_ms"))
        for (start, ms), (next_start, _) in zip(runs, runs[1:], strict=False):
            end = start.timestamp() + ms / 1000
            assert end <= next_start.timestamp() + 0.001, f"{agent.name}: overlapping passes"
    assert_trail_whole()  # five processes appending at once left one unbroken chain
