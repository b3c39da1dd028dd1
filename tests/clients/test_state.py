"""An agent pulls its desired state (ETag-aware), reports what it runs with, proposes its own
desired state; every refusal is a typed error carrying the API's JSON error."""

import pytest
from agentgov import Client, Forbidden, Invalid, NotFound, Unauthenticated

from reconciliation import actions as reconciliation
from reconciliation.models import ObservedState
from registry.models import DesiredStateVersion
from tests.clients.conftest import FAST, ScriptedTransport, approve_new_version


def test_an_unchanged_desired_state_costs_a_304_and_returns_the_cached_object(
        server, agent_key, people):
    transport = ScriptedTransport()
    client = Client(server, agent_key, agent="refund-agent", transport=transport)

    first = client.desired_state()
    assert (first.agent, first.generation, first.running) == ("refund-agent", 1, True)
    assert first.spec["tools"] == ["orders.lookup", "payments.refund"]
    assert first.etag == f'"{first.sha256}"'
    second = client.desired_state()
    assert second is first  # not parsed again
    assert transport.statuses == [200, 304]
    assert "If-None-Match" not in transport.requests[0].headers
    assert transport.requests[1].headers["If-None-Match"] == first.etag

    assert approve_new_version(people, tools=["orders.lookup"]) == 2
    third = client.desired_state()
    assert transport.statuses[-1] == 200
    assert (third.generation, third.spec["tools"]) == (2, ["orders.lookup"])
    client.close()


def test_the_reported_state_is_stored_and_a_repeat_is_only_a_heartbeat(agent_client, push_agent):
    desired = agent_client.desired_state()
    receipt = agent_client.report_observed(desired.as_observed())
    assert receipt.changed is True and len(receipt.sha256) == 64
    again = agent_client.report_observed(desired.as_observed())
    assert again.changed is False and again.sha256 == receipt.sha256
    assert ObservedState.objects.filter(agent=push_agent).count() == 1
    # The desired state, reported as observed, is exactly what the reconciler wants to see.
    assert reconciliation.reconcile_agent(push_agent.pk, trigger="manual").result == "converged"


def test_an_invalid_observed_state_is_invalid_with_every_pointer_and_not_retried(
        server, agent_key, push_agent):
    transport = ScriptedTransport()
    client = Client(server, agent_key, agent="refund-agent", transport=transport, retry=FAST)
    with pytest.raises(Invalid) as caught:
        client.report_observed({"tools": "crm.search", "running": "yes", "colour": "red"})
    error = caught.value
    assert (error.status, error.code) == (422, "invalid")
    assert error.pointers == ["/tools", "/running", "/colour"]
    assert "expected true or false" in error.details[1].message
    assert len(transport.requests) == 1
    assert not ObservedState.objects.exists()
    client.close()


def test_a_wrong_token_an_unknown_agent_and_another_agents_state_are_typed(
        server, agent_key, keys, push_agent):
    transport = ScriptedTransport()
    with Client(server, "not-a-token", agent="refund-agent", transport=transport,
                retry=FAST) as stranger, pytest.raises(Unauthenticated) as caught:
        stranger.desired_state()
    assert (caught.value.status, caught.value.code) == (401, "unauthenticated")
    assert len(transport.requests) == 1

    with Client(server, keys.alice) as alice, pytest.raises(NotFound) as caught:
        alice.get_agent("no-such-agent")
    assert (caught.value.status, caught.value.code) == (404, "not_found")

    with Client(server, agent_key) as agent, pytest.raises(Forbidden):
        agent.desired_state("some-other-agent")


def test_an_agent_proposes_its_own_desired_state_for_a_human_to_approve(agent_client):
    spec = dict(agent_client.desired_state().spec)
    spec["tools"] = [*spec["tools"], "orders.cancel"]
    outcome = agent_client.propose(spec, comment="needs to cancel orders")
    assert outcome["action"] == "proposed" and outcome["state"] == "pending"
    assert any("orders.cancel" in change["text"] for change in outcome["changes"])
    version = DesiredStateVersion.objects.get(pk=outcome["proposal"])
    assert version.is_agent_made and version.comment == "needs to cancel orders"

    with pytest.raises(Invalid) as caught:
        agent_client.propose({**spec, "data": [{"resource": "crm", "access": "own"}]})
    assert caught.value.pointers == ["/spec/data/0/access"]
