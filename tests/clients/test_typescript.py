"""The TypeScript client's own suite (`node --test` in clients/typescript) against a real
control plane: daphne and a worker on the test database, agents registered and approved by the
personas, their tokens handed to the suite in AGENTGOV_TEST. The suite fails, this fails."""

import json
import shutil
import subprocess
import sys

import pytest

from registry import actions
from tests.conftest import ROOT, approved_agent, child_env

TS = ROOT / "clients" / "typescript"
# One agent per story that changes an agent for good (suspended, token revoked, corrected).
STORIES = ("main", "drift", "suspend", "revoke", "mcp")


def npm(*args: str, env: dict[str, str] | None = None, timeout: float = 900
        ) -> subprocess.CompletedProcess:
    return subprocess.run(["npm", *args], cwd=TS, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="session")
def node_modules() -> None:
    """The locked dependency tree (npm ci), once per session when it is missing."""
    assert shutil.which("npm"), "Node.js 20 and npm are needed for the TypeScript suite"
    if not (TS / "node_modules" / ".package-lock.json").exists():
        result = npm("ci", "--no-audit", "--no-fund")
        assert result.returncode == 0, result.stderr[-3000:]


def test_the_typescript_suite_passes_against_a_real_control_plane(
        node_modules, people, live_server_process, start_worker, keys):
    start_worker("reconcile", "default")
    agents = {}
    for story in STORIES:
        agent = approved_agent(people, f"ts-{story}", connector={"type": "push"},
                               enforcement={"default": "correct"})
        token, key = actions.issue_agent_token(agent, actor=people.alice)
        agents[story] = {"name": agent.name, "token": key, "token_id": token.pk}
    suite = {"url": live_server_process.url, "agents": agents, "owner": keys.alice,
             "approver": keys.bob, "root": str(ROOT),
             "control": [sys.executable, str(ROOT / "tests" / "clients" / "typescript_control.py")]}
    result = npm("test", env=child_env(AGENTGOV_TEST=json.dumps(suite)))
    output = result.stdout + result.stderr
    print(output[-20000:])
    assert result.returncode == 0, output[-6000:]
    assert "# fail 0" in output and "# pass 0" not in output
