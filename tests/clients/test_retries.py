"""Retries with backoff only where they are safe: a request that never left, a 429, and for
idempotent requests a lost answer or a 5xx. Never a 4xx such as 422, never a lost POST."""

import pytest
from agentgov import Client, Invalid, ServerError, Unreachable

from config.embedded_redis import free_port
from reconciliation.models import ObservedState
from registry.models import DesiredStateVersion
from tests.clients.conftest import FAST, ScriptedTransport


def agent(server, key, transport):
    return Client(server, key, agent="refund-agent", transport=transport, retry=FAST)


def test_a_get_is_retried_after_a_503_and_a_lost_answer(server, agent_key):
    transport = ScriptedTransport(503, "lose")
    assert agent(server, agent_key, transport).desired_state().generation == 1
    assert transport.statuses == [503, "lost", 200]


def test_retrying_gives_up_after_the_policys_attempts(server, agent_key):
    transport = ScriptedTransport(503, 503, 503, 503)
    with pytest.raises(ServerError) as caught:
        agent(server, agent_key, transport).desired_state()
    assert caught.value.status == 503 and len(transport.requests) == FAST.attempts


def test_reporting_is_idempotent_so_a_lost_answer_is_sent_again(server, agent_key, push_agent):
    transport = ScriptedTransport("lose")
    receipt = agent(server, agent_key, transport).report_observed({"running": True})
    assert transport.statuses == ["lost", 202]
    assert receipt.changed is False  # the first, lost, report already stored it
    assert ObservedState.objects.filter(agent=push_agent).count() == 1


def test_a_post_whose_answer_was_lost_is_not_sent_again(server, agent_key):
    transport = ScriptedTransport()
    client = agent(server, agent_key, transport)
    spec = client.desired_state().spec
    transport.faults = ["lose"]
    with pytest.raises(Unreachable):
        client.propose({**spec, "model": "gpt-5"})
    assert transport.statuses == [200, "lost"]
    # The server did make the proposal: sending it again would have made a second one.
    assert DesiredStateVersion.objects.filter(state="pending").count() == 1


def test_a_post_that_never_left_or_got_a_429_is_sent_again(server, agent_key):
    transport = ScriptedTransport()
    client = agent(server, agent_key, transport)
    spec = client.desired_state().spec
    transport.faults = ["refuse", 429]
    outcome = client.propose({**spec, "model": "gpt-5"})
    assert transport.statuses == [200, "refused", 429, 201]
    assert outcome["action"] == "proposed"
    assert DesiredStateVersion.objects.filter(state="pending").count() == 1


def test_a_422_is_never_retried(server, agent_key):
    transport = ScriptedTransport()
    with pytest.raises(Invalid):
        agent(server, agent_key, transport).report_observed({"running": "maybe"})
    assert transport.statuses == [422]


def test_a_closed_port_is_unreachable_after_the_retries(agent_key):
    client = Client(f"http://127.0.0.1:{free_port()}", agent_key, agent="refund-agent",
                    retry=FAST)
    with pytest.raises(Unreachable) as caught:
        client.desired_state()
    assert "ConnectError" in str(caught.value)
