"""The client against a real daphne server on the test database: people's and agents' keys,
and the refund agent on the push connector (the agent applies its own desired state)."""

from dataclasses import dataclass

import httpx
import pytest
from agentgov import Client, RetryPolicy

from registry import actions
from registry.choices import VersionSource
from registry.models import Agent
from tests.conftest import refund_manifest

# Quick retries, so tests about retrying do not sleep for seconds.
FAST = RetryPolicy(attempts=3, base=0.01, cap=0.05)


@dataclass
class Keys:
    """API tokens of the personas."""

    alice: str
    bob: str
    dana: str


@pytest.fixture
def server(shared_server_process) -> str:
    """The control plane's URL: one daphne per module (a module whose server needs an
    environment of its own overrides this with `live_server_process`)."""
    return shared_server_process.url


@pytest.fixture
def keys(people) -> Keys:
    def key(user):
        return actions.issue_api_token(user, actor="system:test")[1]

    return Keys(alice=key(people.alice), bob=key(people.bob), dana=key(people.dana))


@pytest.fixture
def push_agent(people) -> Agent:
    """The refund agent on the push connector, generation 1 approved by bob."""
    manifest = refund_manifest(connector={"type": "push"},
                               enforcement={"default": "correct"})
    (outcome,) = actions.apply_manifests([manifest], actor=people.alice,
                                         source=VersionSource.YAML)
    actions.approve_proposal(outcome.version.pk, actor=people.bob)
    return Agent.objects.get(name="refund-agent")


@pytest.fixture
def agent_key(people, push_agent) -> str:
    return actions.issue_agent_token(push_agent, actor=people.alice)[1]


@pytest.fixture
def agent_client(server, agent_key):
    """The refund agent's own client (quick retries, quick event batches)."""
    client = Client(server, agent_key, agent="refund-agent", retry=FAST,
                    event_flush_interval=0.05, event_retry_base=0.02, event_retry_cap=0.1)
    yield client
    client.close(timeout=5)


class ScriptedTransport(httpx.BaseTransport):
    """Forwards to the real server, except for the faults scripted for the next requests:
    "refuse" (never sent: connection refused), "lose" (sent, processed, answer lost),
    or an HTTP status answered without forwarding. Records every request and status."""

    def __init__(self, *faults: str | int) -> None:
        self.faults = list(faults)
        self.real = httpx.HTTPTransport()
        self.requests: list[httpx.Request] = []
        self.statuses: list[int | str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        fault = self.faults.pop(0) if self.faults else None
        if fault == "refuse":
            self.statuses.append("refused")
            raise httpx.ConnectError("connection refused (scripted)", request=request)
        if isinstance(fault, int):
            self.statuses.append(fault)
            return httpx.Response(fault, json={"error": {
                "code": "unavailable", "message": "scripted", "details": []}})
        response = self.real.handle_request(request)
        response.read()
        if fault == "lose":
            self.statuses.append("lost")
            raise httpx.ReadTimeout("answer lost (scripted)", request=request)
        self.statuses.append(response.status_code)
        return response

    def close(self) -> None:
        self.real.close()


def approve_new_version(people, **spec_changes) -> int:
    """Alice proposes the push refund agent with `spec_changes`, bob approves; the generation."""
    manifest = refund_manifest(connector={"type": "push"}, enforcement={"default": "correct"},
                               **spec_changes)
    (outcome,) = actions.apply_manifests([manifest], actor=people.alice,
                                         source=VersionSource.YAML)
    actions.approve_proposal(outcome.version.pk, actor=people.bob)
    return Agent.objects.get(name="refund-agent").generation
