"""The stop button reaching what runs, end to end: a real control plane (daphne), a real RQ
worker, a governed pydantic-ai agent following its desired state through the long-poll, a
sandbox agent on its platform, and the governed MCP proxy in front of a real MCP server.

dana presses stop through the API: the looping refund agent's next calls are refused, the
sandbox platform suspends its agent, the proxy refuses its tools. dana asks to lift it, she
cannot approve her own request, the admin approves, and calls run again."""

import threading
import time

import httpx
import pytest
from agentgov import Client
from agentgov.adapters.pydantic_ai import govern
from fastmcp.exceptions import ToolError
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel

from audit.models import AuditEntry
from config import embedded_redis
from registry import actions
from sandbox.models import SandboxAgent
from tests.clients.adapters.conftest import RESOURCES
from tests.clients.adapters.test_pydantic_ai_paths import caller
from tests.clients.test_mcp_proxy import (
    AGENT,
    AGENTCTL,
    QUICK,
    approved_support_agent,
    start,
    stop,
    with_session,
)
from tests.compliance.personas import labelled_agent
from tests.conftest import eventually


def as_person(base: str, key: str, method: str, path: str, body: dict | None = None
              ) -> httpx.Response:
    return httpx.request(method, f"{base}/api/v1{path}", json=body, timeout=30,
                         headers={"Authorization": f"Token {key}"})


def lift_with_two_people(base: str, dana: str, admin: str, stop_id: int) -> None:
    asked = as_person(base, dana, "POST", f"/stops/{stop_id}/lift", {"reason": "fixed"})
    assert asked.status_code == 200, asked.text
    own = as_person(base, dana, "POST", f"/stops/{stop_id}/lift/approve")
    assert own.status_code == 403 and own.json()["error"]["code"] == "four_eyes"
    approved = as_person(base, admin, "POST", f"/stops/{stop_id}/lift/approve")
    assert approved.status_code == 200, approved.text


@pytest.fixture
def admin_key(people) -> str:
    return actions.issue_api_token(people.admin, actor="system:test")[1]


def sandbox_running(name: str) -> bool | None:
    row = SandboxAgent.objects.filter(agent__name=name).first()
    return None if row is None else row.state.get("running", True)


def test_a_team_stop_refuses_a_running_adapter_and_suspends_the_platform_until_two_lift_it(
        server, agent_key, push_agent, people, keys, admin_key, start_worker):
    start_worker("reconcile", "default", **QUICK)
    labelled_agent(people, "payout-agent", {"team": "payments"})  # on the sandbox
    client = Client(server, agent_key, agent="refund-agent", event_flush_interval=0.05)
    agent = Agent(FunctionModel(caller, model_name="gpt-4.1"))
    refunds: list[float] = []

    @agent.tool_plain(name="payments.refund")
    def refund(order: str, amount: float) -> str:
        refunds.append(time.monotonic())
        return "refunded"

    # a 30 s interval: only the long-poll can bring the stop in quickly
    governor = govern(agent, client=client, name="refund-agent", resources=RESOURCES,
                      interval=30).start()
    done, refused_at = threading.Event(), []

    def loop() -> None:
        while not done.is_set():
            output = agent.run_sync('payments.refund {"order": "o-1", "amount": 10}').output
            if "suspended" in output:
                refused_at.append(time.monotonic())
                return

    try:
        eventually(lambda: governor.applied is not None)
        looping = threading.Thread(target=loop, daemon=True)
        looping.start()
        eventually(lambda: len(refunds) >= 3)
        stopped_at = time.monotonic()
        placed = as_person(server, keys.dana, "POST", "/stops",
                           {"scope": "team", "team": "payments", "reason": "refund loop"})
        assert placed.status_code == 201, placed.text
        stop_id = placed.json()["id"]
        looping.join(timeout=60)
        assert refused_at and refused_at[0] - stopped_at < 10
        ran = len(refunds)
        # the platform: the worker suspended the sandbox agent through its connector
        eventually(lambda: sandbox_running("payout-agent") is False, timeout=120,
                   message="the sandbox agent was not suspended on its platform")
        enforced = eventually(lambda: set(AuditEntry.objects.filter(
            action="stop.enforced").values_list("agent", flat=True)) == {
            "payout-agent", "refund-agent"} or None, timeout=120)
        assert enforced
        # the decision point refuses the agent's own requests
        asked = httpx.post(f"{server}/api/v1/agents/refund-agent/decisions",
                           json={"action": "payments.refund", "amount": 10},
                           headers={"Authorization": f"Token {agent_key}"}, timeout=30)
        assert asked.json()["outcome"] == "deny" and "refund loop" in asked.json()["rule"]
        assert "suspended" in agent.run_sync(
            'payments.refund {"order": "o-2", "amount": 10}').output
        assert len(refunds) == ran

        lift_with_two_people(server, keys.dana, admin_key, stop_id)
        eventually(lambda: "refunded" in agent.run_sync(
            'payments.refund {"order": "o-3", "amount": 10}').output, timeout=60,
            message="the adapter still refuses after the lift")
        assert len(refunds) > ran
        eventually(lambda: sandbox_running("payout-agent") is True, timeout=120,
                   message="the sandbox agent was not resumed on its platform")
    finally:
        done.set()
        governor.stop()
        client.close(timeout=2)


def test_an_owner_stop_makes_the_mcp_proxy_refuse_until_two_lift_it(
        people, keys, admin_key, server, state, http_upstream, start_worker):
    start_worker("reconcile", "ingest", "default", **QUICK)
    _, support_key = approved_support_agent(people, server, keys.alice, http_upstream)
    port = embedded_redis.free_port()
    proxy = start([AGENTCTL, "mcp-proxy", "--agent", AGENT, "--upstream", http_upstream,
                   "--port", str(port), "--interval", "0.5"], port,
                  AGENTGOV_URL=server, AGENTGOV_TOKEN=support_key)
    url = f"http://127.0.0.1:{port}/mcp"

    def lookup() -> str:
        try:
            return with_session(url, lambda s: s.call_tool("lookup_order", {"order_id": "42"})
                                ).data
        except ToolError as error:
            return f"refused: {error}"

    try:
        assert lookup() == "order 42: 2 mugs, delivered broken"
        placed = as_person(server, keys.dana, "POST", "/stops",
                           {"scope": "owner", "owner": "alice", "reason": "alice's laptop"})
        assert placed.status_code == 201, placed.text
        eventually(lambda: lookup().startswith("refused"), timeout=60,
                   message="the proxy still runs tools after the stop")
        assert "not approved" in lookup()
        lift_with_two_people(server, keys.dana, admin_key, placed.json()["id"])
        eventually(lambda: lookup() == "order 42: 2 mugs, delivered broken", timeout=60,
                   message="the proxy still refuses after the lift")
    finally:
        stop(proxy)

