"""Losing the control plane stops a governed agent. A revoked token (401) or a refused one
(403) stops every governed call at once, and the owner's code gets a refusal, not a raw
error; an unreachable control plane (a refused connection, a timeout, a 5xx) is tolerated
only for `fail_open_seconds` after the last contact, and the owner's `read_only_tools` keep
running while it is unreachable (never after a 401/403). A real Pydantic AI agent, governed
against the real server; the faults are a stopped port and small local servers."""

import http.server
import socket
import threading

import pytest
from agentgov import Client
from agentgov.adapters import CredentialsRefused
from agentgov.adapters.pydantic_ai import govern
from agentgov.control_link import ControlLink
from agentgov.errors import Forbidden, ServerError, Unauthenticated, Unreachable
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel

from registry import actions
from registry.models import ApiToken
from tests.clients.adapters.conftest import FAST, RESOURCES
from tests.clients.adapters.test_pydantic_ai_paths import caller
from tests.clients.conftest import FAST as FAST_RETRY
from tests.conftest import eventually

REFUND = 'payments.refund {"order": "o-1", "amount": 120}'
LOOKUP = 'orders.lookup {"order": "o-1"}'


class Answering(http.server.ThreadingHTTPServer):
    """A local server answering every request with one status (a 403, a 503)."""

    def __init__(self, status: int) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = b'{"error": {"code": "x", "message": "scripted", "details": []}}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Silent:
    """A local port that accepts connections and never answers (a timeout)."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"


def stopped_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed again: refused


def refund_agent(ran: list) -> Agent:
    agent = Agent(FunctionModel(caller, model_name="gpt-4.1"))

    @agent.tool_plain(name="orders.lookup")
    def lookup(order: str) -> str:
        ran.append(("orders.lookup", order))
        return f"{order}: shipped"

    @agent.tool_plain(name="payments.refund")
    def refund(order: str, amount: float) -> str:
        ran.append(("payments.refund", order, amount))
        return f"refunded {amount:g}"

    return agent


@pytest.fixture
def governed_client(server, agent_key):
    client = Client(server, agent_key, agent="refund-agent", retry=FAST_RETRY, timeout=1.0,
                    event_flush_interval=0.05, event_retry_base=0.02, event_retry_cap=0.1)
    yield client
    client.close(timeout=1)


def start(client: Client, ran: list, **options) -> tuple[Agent, object]:
    agent = refund_agent(ran)
    governor = govern(agent, client=client, name="refund-agent", resources=RESOURCES,
                      **{**FAST, **options}).start()
    eventually(lambda: governor.applied is not None)
    assert "refunded 120" in agent.run_sync(REFUND).output  # governed and working
    return agent, governor


def test_a_revoked_token_stops_every_call_and_the_owner_gets_a_refusal(
        governed_client, push_agent, people):
    ran: list = []
    agent, governor = start(governed_client, ran, read_only_tools=["orders.lookup"])
    for token in ApiToken.objects.filter(agent=push_agent):
        actions.revoke_api_token(token, actor=people.alice, reason="agent retired")
    eventually(lambda: governor.link.stopped, message="the 401 never reached the adapter")
    for prompt in (REFUND, LOOKUP):  # a read-only tool stops too: the token is gone
        with pytest.raises(CredentialsRefused, match="refused this agent's credentials"):
            agent.run_sync(prompt)
    governor.stop()
    assert ran == [("payments.refund", "o-1", 120.0)]


@pytest.mark.parametrize("fault", ["403", "refused", "timeout", "503"])
def test_losing_the_control_plane_refuses_calls(governed_client, push_agent, fault):
    ran: list = []
    agent, governor = start(governed_client, ran, read_only_tools=["orders.lookup"])
    if fault in ("403", "503"):
        governed_client.base_url = Answering(int(fault)).url
    else:
        governed_client.base_url = stopped_port() if fault == "refused" else Silent().url
    eventually(lambda: governor.link.refusal("payments.refund") is not None,
               message=f"the {fault} never reached the adapter")
    if fault == "403":
        for prompt in (REFUND, LOOKUP):
            with pytest.raises(CredentialsRefused):
                agent.run_sync(prompt)
        expected = [("payments.refund", "o-1", 120.0)]
    else:
        refused = agent.run_sync(REFUND).output
        assert "unreachable" in refused and "grace is 0s" in refused
        assert "o-1: shipped" in agent.run_sync(LOOKUP).output  # the owner's read-only tool
        expected = [("payments.refund", "o-1", 120.0), ("orders.lookup", "o-1")]
    governor.stop()
    assert ran == expected


def test_within_the_grace_calls_run_and_contact_closes_the_gap(governed_client, push_agent,
                                                                server):
    ran: list = []
    agent, governor = start(governed_client, ran, fail_open_seconds=3600)
    governed_client.base_url = stopped_port()
    eventually(lambda: governor.link.unreachable is not None)
    assert "o-2: shipped" in agent.run_sync(
        'orders.lookup {"order": "o-2"}').output  # inside the grace
    # A call its rule must judge needs the decision function, which is out of reach: even a
    # small refund is refused, whatever the grace (no gate judges an amount on its own).
    assert "needs a decision and the control plane did not give one" in agent.run_sync(
        'payments.refund {"order": "o-3", "amount": 40}').output
    governed_client.base_url = server
    eventually(lambda: governor.link.unreachable is None)
    governor.stop()
    assert [call[1] for call in ran] == ["o-1", "o-2"]


def test_the_link_decides_from_each_kind_of_answer():
    now = [1000.0]
    link = ControlLink(fail_open_seconds=10, read_only_tools=["orders.lookup"],
                       clock=lambda: now[0])
    link.failure(Unreachable("refused"))
    now[0] += 10
    assert link.refusal("payments.refund") is None  # the grace, to the second
    now[0] += 0.5
    assert "unreachable for 10s" in link.refusal("payments.refund")
    assert link.refusal("orders.lookup") is None
    link.failure(ServerError(503, "unavailable", "down"))
    assert link.refusal("payments.refund") is not None  # a 5xx is no contact
    link.contact()
    assert link.refusal("payments.refund") is None
    link.failure(Unauthenticated(401, "unauthenticated", "revoked"))
    link.contact()  # a later answer does not bring a refused token back
    assert "credentials" in link.refusal("orders.lookup")
    assert ControlLink(fail_open_seconds=0).fail_open_seconds == 0
    with pytest.raises(ValueError):
        ControlLink(fail_open_seconds=float("nan"))
    forbidden = ControlLink()
    forbidden.failure(Forbidden(403, "forbidden", "another agent"))
    assert forbidden.stopped


def test_the_grace_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("AGENTGOV_FAIL_OPEN_SECONDS", "30")
    assert ControlLink().fail_open_seconds == 30
    monkeypatch.setenv("AGENTGOV_FAIL_OPEN_SECONDS", "thirty")
    with pytest.raises(ValueError, match="AGENTGOV_FAIL_OPEN_SECONDS"):
        ControlLink()
    monkeypatch.setenv("AGENTGOV_FAIL_OPEN_SECONDS", "-1")
    with pytest.raises(ValueError, match="0 or more"):
        ControlLink()
