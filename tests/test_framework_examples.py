"""The framework examples (examples/*_agent/agent.py) as separate processes against the real
server and workers: each registers, is governed in its own process (observed, in policy), sends
its events with no event code, and holds the $640 refund until a human allows it."""

import os
import signal
import subprocess
import sys

import pytest

from reconciliation import actions
from reconciliation.models import Escalation
from registry import actions as registry_actions
from registry.models import Agent
from runtime.models import Decision
from tests.conftest import ROOT, eventually


@pytest.mark.parametrize("framework", ["langgraph", "openai-agents", "pydantic-ai"])
def test_the_framework_example_runs_governed(framework, people, live_server_process,
                                              start_worker, tmp_path):
    example = ROOT / "examples" / f"{framework.replace('-', '_')}_agent" / "agent.py"
    worker = start_worker("reconcile", "ingest", "default")
    _, alice_key = registry_actions.issue_api_token(people.alice, actor=people.alice)
    env = {**os.environ, "AGENTGOV_URL": live_server_process.url}
    registered = subprocess.run([sys.executable, str(example), "register", "--token", alice_key],
                                env=env, capture_output=True, text=True, timeout=120)
    assert registered.returncode == 0, registered.stderr
    registry_actions.approve_proposal(int(registered.stdout.strip()), actor=people.bob)
    agent = Agent.objects.get(name=f"refund-{framework}")
    _, agent_key = registry_actions.issue_agent_token(agent, actor=people.alice)
    log = open(tmp_path / "agent.log", "w+")  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, str(example), "run", "--orders", "9", "--pause", "0.1",
         "--linger", "120"],
        env={**env, "AGENTGOV_TOKEN": agent_key, "AGENTGOV_AGENT": agent.name},
        stdout=log, stderr=subprocess.STDOUT)
    said = lambda: (tmp_path / "agent.log").read_text()  # noqa: E731
    try:
        eventually(lambda: Agent.objects.filter(pk=agent.pk,
                                                status__health="in_policy").exists(),
                   timeout=90,
                   message=lambda: f"agent said:\n{said()}\nworker said:\n{worker.output()}")
        observed = agent.observations.order_by("-observed_at").first().state
        assert observed["framework"] == framework and observed["model"] == "gpt-4.1"
        assert observed["tools"] == ["orders.lookup", "payments.refund"]
        escalation = eventually(lambda: Escalation.objects.filter(
            agent=agent, decision__isnull=False).first(), timeout=90, message=said())
        assert escalation.decision.request["amount"] == 640.0
        actions.resolve_escalation(escalation.pk, actor=people.bob, resolution="allow",
                                   comment="damaged order confirmed")
        eventually(lambda: Decision.objects.get(pk=escalation.decision_id).status == "used",
                   timeout=90, message=said())
        eventually(lambda: agent.events.filter(kind="action").count() == 3, timeout=60,
                   message=said())
        assert agent.events.filter(kind="tool_call", tool="orders.lookup").count() == 9
        assert "refunded $640 for order-0009" in said()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        log.close()
