"""The TypeScript client's own suite (`node --test` in clients/typescript) against a real
control plane: daphne and a worker on the test database, agents registered and approved by the
personas, their tokens handed to the suite in AGENTGOV_TEST. The suite fails, this fails.

The MCP stories run the frameworks' own MCP clients against a real MCP server over streamable
HTTP (`mcp_upstream.py`, the proxy tests' FastMCP server, offering lookup_order, refund_order and
delete_customer): their agents approve the first two as the server offers them now, and the
suite reads the server's own record of the calls it ran."""

import json
import shutil
import subprocess
import sys

import pytest

from registry import actions
from registry.models import Agent
from tests.clients.test_mcp_proxy import http_upstream, observe, rug_pull, state  # noqa: F401
from tests.conftest import ROOT, approved_agent, child_env

pytestmark = pytest.mark.long(minutes=3)

TS = ROOT / "clients" / "typescript"
# One agent per story that changes an agent for good (suspended, token revoked, corrected).
STORIES = ("main", "drift", "suspend", "stop", "revoke", "mcp", "mcp-fix", "lg-main",
           "lg-drift", "lg-suspend", "lg-revoke", "oa-main", "oa-drift", "oa-suspend",
           "oa-revoke", "oa-mcp")
# The MCP stories whose drift (the server's unapproved tool) waits for a human, so the suite can
# call that tool and see it refused before any correction takes it away.
ESCALATED = ("mcp", "oa-mcp")


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


@pytest.fixture(scope="session")
def tarball(node_modules, tmp_path_factory):
    """The package as `npm pack` makes it (built by its prepack), once per session: each
    framework's fresh folder installs the same tarball."""
    where = tmp_path_factory.mktemp("packed")
    packed = npm("pack", "--pack-destination", str(where))
    assert packed.returncode == 0, packed.stderr[-3000:]
    return where / packed.stdout.strip().splitlines()[-1]


@pytest.mark.timeout(1200)  # four suites on a loaded 2-core machine
def test_the_typescript_suite_passes_against_a_real_control_plane(
        node_modules, people, live_server_process, start_worker, keys, state,  # noqa: F811
        http_upstream):  # noqa: F811
    # Each story drifts one of alice's agents on purpose, several within minutes: the fleet's
    # circuit breaker (which pauses corrections when many agents drift at once) would hold the
    # later stories' corrections, so it is set out of their reach here.
    worker = start_worker("reconcile", "default", BREAKER_MIN_AGENTS="1000",
                          BREAKER_SCOPE_MIN_DRIFTING="1000")
    rug_pull(state)  # the server offers delete_customer too: a tool nobody approves
    (orders,) = observe(live_server_process.url, keys.alice, http_upstream)
    orders["tools"] = [t for t in orders["tools"] if t["name"] in ("lookup_order", "refund_order")]
    agents = {}
    for story in STORIES:
        mcp = {"mcp_servers": [orders]} if story.endswith(("mcp", "mcp-fix")) else {}
        agent = approved_agent(people, f"ts-{story}", connector={"type": "push"}, **mcp,
                               enforcement={"default": "escalate" if story in ESCALATED
                                            else "correct"})
        token, key = actions.issue_agent_token(agent, actor=people.alice)
        agents[story] = {"name": agent.name, "token": key, "token_id": token.pk}
    suite = {"url": live_server_process.url, "agents": agents, "owner": keys.alice,
             "approver": keys.bob, "root": str(ROOT),
             "mcp": {"url": http_upstream, "calls": f"{state}.calls"},
             "control": [sys.executable, str(ROOT / "tests" / "clients" / "typescript_control.py")]}
    result = npm("test", env=child_env(AGENTGOV_TEST=json.dumps(suite)), timeout=1100)
    output = result.stdout + result.stderr
    print(output[-20000:])
    assert result.returncode == 0, output[-6000:] + loop_record(agents, worker)
    assert "# fail 0" in output and "# pass 0" not in output
    for suite in ("the client", "Vercel AI SDK adapter", "LangGraph.js adapter",
                  "OpenAI Agents SDK adapter"):
        assert f"ok 1 - {suite}" in output or f"- {suite}\n" in output, suite


def loop_record(agents: dict[str, dict], worker) -> str:
    """What the control plane did for each story's agent, for a failure's message: its
    observed states, passes and findings, and the end of the worker's log."""
    from reconciliation.models import Finding, ObservedState, ReconcileRun

    lines = ["", "what the control plane recorded:"]
    for story, agent in agents.items():
        name = agent["name"]
        states = [sorted(s.get("tools", [])) for s in ObservedState.objects.filter(
            agent__name=name).order_by("observed_at").values_list("state", flat=True)]
        runs = list(ReconcileRun.objects.filter(agent__name=name).order_by("pk").values_list(
            "trigger", "result"))
        found = list(Finding.objects.filter(agent__name=name).values_list("pointer", "status"))
        lines.append(f"{story}: tools reported {states}; passes {runs}; findings {found}")
    return "\n".join(lines) + "\nworker:\n" + worker.output()[-4000:]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("framework, packages", [
    ("vercel-ai", ("ai", "zod")),
    ("langgraph-js", ("@langchain/langgraph", "@langchain/core", "zod")),
    ("openai-agents-js", ("@openai/agents", "zod")),
])
def test_the_packed_package_installs_into_a_fresh_folder_and_runs_the_example(
        tarball, people, live_server_process, keys, tmp_path, framework, packages):
    folder = tmp_path / "fresh"
    folder.mkdir()
    (folder / "package.json").write_text('{"name": "fresh", "private": true, "type": "module"}')
    versions = json.loads((TS / "package.json").read_text())["devDependencies"]
    installed = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--prefer-offline", str(tarball),
         *(f"{name}@{versions[name]}" for name in packages)],
        cwd=folder, capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert not (folder / "node_modules" / "agentgov" / "src").exists()  # what `files` ships
    example = ROOT / "examples" / "typescript" / framework
    for name in ("agent.mjs", "manifest.yaml"):
        shutil.copy(example / name, folder / name)

    def node(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(["node", "agent.mjs", *args], cwd=folder, capture_output=True,
                              text=True, timeout=300,
                              env={**child_env(), "AGENTGOV_URL": live_server_process.url, **env})

    registered = node("register", "--token", keys.alice)
    assert registered.returncode == 0, registered.stderr
    actions.approve_proposal(int(registered.stdout.strip()), actor=people.bob)
    agent = Agent.objects.get(name=f"refund-{framework}")
    token = actions.issue_agent_token(agent, actor=people.alice)[1]
    ran = node("run", "--orders", "6", "--pause", "0", AGENTGOV_TOKEN=token,
               AGENTGOV_AGENT=agent.name)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "refund order-0003 120 -> " in ran.stdout and "refunded 120 on order-0003" in ran.stdout
    assert "refunded 80 on order-0006" in ran.stdout and "refused" not in ran.stdout

    audit_cli = subprocess.run(["npx", "--no-install", "agentgov-audit", "--help"], cwd=folder,
                               capture_output=True, text=True, timeout=120)
    assert audit_cli.returncode == 0 and "chain only" in audit_cli.stdout, audit_cli.stderr
