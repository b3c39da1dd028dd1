"""The worked example as a separate process against the real server and workers: it registers,
reports, sends events, waits for a human before a $640 refund, and after a bad deployment the
control plane's correction reaches the agent process itself and is verified."""

import json
import os
import signal
import subprocess
import sys

from reconciliation import actions
from reconciliation.models import Escalation, Finding
from registry import actions as registry_actions
from registry.models import Agent
from runtime.models import Decision
from tests.conftest import ROOT, eventually

EXAMPLE = ROOT / "examples" / "refund_agent" / "agent.py"


def test_the_refund_agent_story_end_to_end(people, live_server_process, start_worker,
                                           tmp_path):
    worker = start_worker("reconcile", "ingest", "default")
    _, alice_key = registry_actions.issue_api_token(people.alice, actor=people.alice)
    env = {**os.environ, "AGENTGOV_URL": live_server_process.url,
           "REFUND_AGENT_STATE": str(tmp_path / "deployment.json")}
    registered = subprocess.run([sys.executable, str(EXAMPLE), "register", "--token", alice_key],
                                env=env, capture_output=True, text=True, timeout=60)
    assert registered.returncode == 0, registered.stderr
    registry_actions.approve_proposal(int(registered.stdout.strip()), actor=people.bob)
    agent = Agent.objects.get(name="refund-bot")
    _, agent_key = registry_actions.issue_agent_token(agent, actor=people.alice)
    log = open(tmp_path / "agent.log", "w+")  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "run", "--orders", "12", "--pause", "0.2",
         "--interval", "0.5", "--linger", "120"],
        env={**env, "AGENTGOV_TOKEN": agent_key, "AGENTGOV_AGENT": "refund-bot"},
        stdout=log, stderr=subprocess.STDOUT)
    said = lambda: (tmp_path / "agent.log").read_text()  # noqa: E731
    told = lambda: f"agent said:\n{said()}\nworker said:\n{worker.output()}"  # noqa: E731
    try:
        # Its third refund ($640, ~2 s after it starts) is above $500: it waits for a human,
        # which escalates the agent. That can come before or after the loop's first pass, so
        # the human answers first; only then can the agent be in policy.
        escalation = eventually(lambda: Escalation.objects.filter(
            agent=agent, decision__isnull=False).first(), timeout=90, message=told)
        # It asked with the tool's arguments; the control plane read the amount from them.
        assert escalation.decision.request == {
            "action": "payments.refund", "tool": "payments.refund", "amount": 640.0,
            "arguments": {"order": "order-0009", "amount": 640}, "wait_seconds": 120.0}
        actions.resolve_escalation(escalation.pk, actor=people.carol, resolution="allow",
                                   comment="damaged order confirmed")
        eventually(lambda: Decision.objects.get(pk=escalation.decision_id).status == "used",
                   timeout=90, message=told)
        # The agent deploys its approved state and reports it; the loop sees it converged.
        eventually(lambda: Agent.objects.filter(pk=agent.pk,
                                                status__health="in_policy").exists(),
                   timeout=90, message=told)
        eventually(lambda: agent.events.filter(kind="action").count() >= 3, timeout=60,
                   message=told)
        assert not Finding.objects.filter(agent=agent, kind="action_without_signoff").exists()

        # A bad deployment: the sidecar reports it, the correction reaches the agent process.
        bad = subprocess.run([sys.executable, str(EXAMPLE), "deploy-bad"], env=env,
                             capture_output=True, text=True, timeout=30)
        assert bad.returncode == 0, bad.stderr
        eventually(lambda: Finding.objects.filter(agent=agent, behaviour=False).count() == 3,
                   timeout=90, message=told)
        eventually(lambda: set(Finding.objects.filter(agent=agent, behaviour=False)
                               .values_list("status", flat=True)) == {"corrected"},
                   timeout=90, message=told)
        deployment = json.loads((tmp_path / "deployment.json").read_text())
        assert "crm.search" not in deployment["tools"]
        assert all(d["resource"] != "crm" for d in deployment["data"])
        assert deployment["actions"]["payments.refund"] == {"approval_above": 500, "max": 5000}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        log.close()


def test_the_agent_stops_on_sigterm_while_it_waits_for_a_human(people, live_server_process,
                                                               tmp_path):
    """A stopped deployment stops: SIGTERM ends the agent's wait for a decision at once, not
    when the two-minute wait runs out."""
    _, alice_key = registry_actions.issue_api_token(people.alice, actor=people.alice)
    env = {**os.environ, "AGENTGOV_URL": live_server_process.url,
           "REFUND_AGENT_STATE": str(tmp_path / "deployment.json")}
    registered = subprocess.run([sys.executable, str(EXAMPLE), "register", "--token", alice_key],
                                env=env, capture_output=True, text=True, timeout=60)
    assert registered.returncode == 0, registered.stderr
    registry_actions.approve_proposal(int(registered.stdout.strip()), actor=people.bob)
    agent = Agent.objects.get(name="refund-bot")
    _, agent_key = registry_actions.issue_agent_token(agent, actor=people.alice)
    # Deployed with the approved $500 rule from the start, so its $640 refund asks a human.
    (tmp_path / "deployment.json").write_text(json.dumps(
        {"actions": {"payments.refund": {"approval_above": 500, "max": 5000}}}))
    log = tmp_path / "agent.log"
    with open(log, "w") as output:
        process = subprocess.Popen(
            [sys.executable, str(EXAMPLE), "run", "--orders", "12", "--pause", "0.1"],
            env={**env, "AGENTGOV_TOKEN": agent_key, "AGENTGOV_AGENT": "refund-bot"},
            stdout=output, stderr=subprocess.STDOUT)
        try:
            eventually(lambda: Decision.objects.filter(agent=agent, status="pending").exists(),
                       timeout=90, message=log.read_text)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=20) == 0, log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=15)
    assert "refunded $640" not in log.read_text()
