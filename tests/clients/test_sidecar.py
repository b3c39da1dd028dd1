"""watch(): the sidecar pulls the desired state, applies it through the owner's callback when
it changes, and reports the result, so the push connector's corrections reach the agent and
verification sees them."""

import threading
from contextlib import contextmanager

import pytest
from agentgov import Client, Unauthenticated

from reconciliation import actions as reconciliation
from reconciliation.models import Correction, Finding
from tests.clients.conftest import FAST, ScriptedTransport, approve_new_version
from tests.conftest import eventually


def latest_report(agent) -> dict:
    return agent.observations.order_by("-observed_at").first().state


class Runtime:
    """A pretend agent framework: the configuration the agent really runs with."""

    def __init__(self, state: dict | None = None) -> None:
        self.state = state or {}
        self.applied: list[int] = []

    def apply(self, desired) -> None:
        self.applied.append(desired.generation)
        self.state = desired.as_observed()

    def observe(self) -> dict:
        return dict(self.state)


@contextmanager
def in_background(client, runtime, **options):
    """watch() in a thread, stopped (and joined) however the test ends."""
    stop = threading.Event()
    thread = threading.Thread(target=client.watch, args=(runtime.apply,),
                              kwargs={"interval": 0.05, "stop": stop, **options}, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(timeout=5)


def test_a_new_generation_is_applied_and_reported_back(server, agent_key, push_agent, people):
    transport = ScriptedTransport()
    client = Client(server, agent_key, agent="refund-agent", transport=transport)
    runtime = Runtime()
    with in_background(client, runtime) as thread:
        eventually(lambda: runtime.applied == [1] and push_agent.observations.exists())
        eventually(lambda: transport.statuses.count(304) >= 3)  # polling an unchanged state
        assert runtime.applied == [1]

        approve_new_version(people, tools=["orders.lookup"])
        eventually(lambda: runtime.applied == [1, 2])
        eventually(lambda: latest_report(push_agent)["tools"] == ["orders.lookup"])
    assert not thread.is_alive()
    assert reconciliation.reconcile_agent(push_agent.pk, trigger="manual").result == "converged"
    client.close()


def test_an_answer_that_arrives_after_stop_is_not_applied(server, agent_key, push_agent,
                                                          people):
    """The watch is stopped while its pull is held; the pull then answers with a new state (a
    suspension): the agent is left as it was when stopped, and nothing is reported."""
    client = Client(server, agent_key, agent="refund-agent")
    runtime, stop = Runtime(), threading.Event()
    pull = client.desired_state

    def held_until_stopped(agent=None, *, wait=0.0, retry=True):
        if wait <= 0:
            return pull(agent, wait=wait, retry=retry)
        reconciliation.suspend_agent(push_agent, actor=people.bob, reason="stop it")
        answer = pull(agent, wait=wait, retry=retry)  # answered at once: the state changed
        stop.set()  # the owner stopped the watch while the pull was out
        return answer

    client.desired_state = held_until_stopped
    reports = push_agent.observations.count
    client.watch(runtime.apply, interval=5, stop=stop)
    assert runtime.applied == [1]  # the first state only, not the suspended one
    assert runtime.state["running"] is True
    assert reports() == 1  # the first apply's report only
    client.close()


def test_a_push_correction_reaches_the_agent_and_verification_sees_it(agent_client, push_agent):
    desired = agent_client.desired_state()
    bad = {**desired.as_observed(), "tools": [*desired.spec["tools"], "crm.search"]}
    agent_client.report_observed(bad)  # a bad deployment, reported before the sidecar runs
    run = reconciliation.reconcile_agent(push_agent.pk, trigger="observation")
    assert run.result == "correcting" and [c["outcome"] for c in run.changes] == ["published"]
    assert Finding.objects.get().status == "correcting"

    runtime = Runtime(bad)
    applied = agent_client.watch(runtime.apply, observe=runtime.observe, iterations=1)
    # The same spec, now listing the published correction (which is what changed its ETag).
    assert (applied.generation, applied.spec) == (desired.generation, desired.spec)
    assert applied.corrections == (Correction.objects.get().idempotency_key,)
    assert "crm.search" not in runtime.state["tools"]
    assert reconciliation.reconcile_agent(push_agent.pk, trigger="observation").result == (
        "converged")
    assert Finding.objects.get().status == "corrected"
    assert Correction.objects.get().result == "verified"


@pytest.mark.parametrize("restore", [True, False])
def test_drift_behind_the_sidecars_back_is_reported_and_restored_unless_told_not_to(
        agent_client, push_agent, restore):
    runtime = Runtime()
    with in_background(agent_client, runtime, observe=runtime.observe, restore_drift=restore):
        eventually(lambda: runtime.applied == [1] and push_agent.observations.exists())
        approved = runtime.observe()
        drifted = {**approved, "tools": sorted([*approved["tools"], "crm.search"])}
        runtime.state = drifted  # someone changed the agent behind the sidecar's back
        # Read in Python: SQLite (the embedded default) has no JSON `contains` lookup.
        eventually(lambda: any("crm.search" in observation.state.get("tools", [])
                               for observation in push_agent.observations.all()))
        if restore:
            eventually(lambda: latest_report(push_agent)["tools"] == approved["tools"])
            assert runtime.applied == [1, 1] and runtime.state == approved
    if not restore:
        assert runtime.applied == [1] and latest_report(push_agent)["tools"] == drifted["tools"]


def test_a_failing_apply_is_tried_again_on_the_next_tick(agent_client, push_agent):
    calls = []

    def flaky(desired):
        calls.append(desired.generation)
        if len(calls) == 1:
            raise RuntimeError("the framework was restarting")

    assert agent_client.watch(flaky, interval=0.01, iterations=3).generation == 1
    assert calls == [1, 1]  # failed, then applied; the third tick found nothing new
    assert latest_report(push_agent)["running"] is True


def test_a_refused_token_stops_the_sidecar(server, push_agent):
    client = Client(server, "revoked-or-wrong", agent="refund-agent", retry=FAST)
    with pytest.raises(Unauthenticated):
        client.watch(lambda desired: None, interval=0.01, iterations=5)
