"""The desired-state long-poll under daphne: `?wait=N` with the agent's ETag is held until the
agent's answer changes (a suspension, a retirement's revoked token) and answered at once, or
304 when the wait ends; a bad `wait` is the documented 400; a suspended agent governed by an
adapter polling every 30 s is refused within moments."""

import threading
import time

import httpx
import pytest
from agentgov import Client
from agentgov.adapters.pydantic_ai import govern
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel

from reconciliation import actions as reconciliation
from registry import actions
from registry.models import ApiToken
from tests.clients.adapters.conftest import RESOURCES
from tests.clients.adapters.test_pydantic_ai_paths import caller
from tests.conftest import eventually


def url(server: str) -> str:
    return f"{server}/api/v1/agents/refund-agent/desired-state"


def first(server: str, key: str) -> httpx.Response:
    answer = httpx.get(url(server), headers={"Authorization": f"Token {key}"})
    assert answer.status_code == 200
    return answer


def held(server: str, key: str, etag: str, wait: float, out: dict) -> None:
    started = time.monotonic()
    answer = httpx.get(url(server), params={"wait": wait}, timeout=wait + 30,
                       headers={"Authorization": f"Token {key}", "If-None-Match": etag})
    out.update(status=answer.status_code, seconds=time.monotonic() - started,
               body=answer.json() if answer.content else None)


def hold(server: str, key: str, etag: str, wait: float) -> tuple[threading.Thread, dict]:
    out: dict = {}
    thread = threading.Thread(target=held, args=(server, key, etag, wait, out), daemon=True)
    thread.start()
    return thread, out


def test_a_held_poll_answers_the_suspension_at_once(server, agent_key, push_agent, people):
    etag = first(server, agent_key).headers["ETag"]
    thread, out = hold(server, agent_key, etag, 60)
    time.sleep(1)  # the poll is held (no answer yet) when the suspension comes
    assert not out
    suspended_at = time.monotonic()
    reconciliation.suspend_agent(push_agent, actor=people.bob, reason="refund loop")
    thread.join(timeout=60)
    assert out["status"] == 200 and out["body"]["running"] is False
    assert time.monotonic() - suspended_at < 10  # not the 60 s wait, nor a 5 s tick


def test_an_unchanged_state_is_304_when_the_wait_ends(server, agent_key, push_agent):
    etag = first(server, agent_key).headers["ETag"]
    thread, out = hold(server, agent_key, etag, 1.5)
    thread.join(timeout=60)
    assert out["status"] == 304 and out["seconds"] >= 1.4


def test_a_retirement_answers_the_held_poll_with_401(server, agent_key, push_agent, people):
    etag = first(server, agent_key).headers["ETag"]
    thread, out = hold(server, agent_key, etag, 60)
    for token in ApiToken.objects.filter(agent=push_agent):
        actions.revoke_api_token(token, actor=people.alice, reason="retired")
    thread.join(timeout=60)
    assert out["status"] == 401 and out["seconds"] < 30


@pytest.mark.parametrize("wait", ["soon", "61", "-1", "nan"])
def test_a_bad_wait_is_the_documented_400(server, agent_key, push_agent, wait):
    etag = first(server, agent_key).headers["ETag"]
    answer = httpx.get(url(server), params={"wait": wait},
                       headers={"Authorization": f"Token {agent_key}", "If-None-Match": etag})
    assert answer.status_code == 400
    (detail,) = answer.json()["error"]["details"]
    assert detail["pointer"] == "/wait"


def test_a_suspended_looping_agent_is_refused_long_before_its_poll_interval(
        server, agent_key, push_agent, people):
    client = Client(server, agent_key, agent="refund-agent", event_flush_interval=0.05)
    agent = Agent(FunctionModel(caller, model_name="gpt-4.1"))
    refunds: list[float] = []

    @agent.tool_plain(name="payments.refund")
    def refund(order: str, amount: float) -> str:
        refunds.append(time.monotonic())
        return "refunded"

    # a 30 s interval: only the long-poll can bring the suspension in quickly
    governor = govern(agent, client=client, name="refund-agent", resources=RESOURCES,
                      interval=30).start()
    eventually(lambda: governor.applied is not None)
    stop, refused_at = threading.Event(), []

    def loop() -> None:
        while not stop.is_set():
            output = agent.run_sync('payments.refund {"order": "o-1", "amount": 10}').output
            if "suspended" in output:
                refused_at.append(time.monotonic())
                return

    looping = threading.Thread(target=loop, daemon=True)
    looping.start()
    eventually(lambda: len(refunds) >= 3)
    suspended_at = time.monotonic()
    reconciliation.suspend_agent(push_agent, actor=people.bob, reason="refund loop")
    looping.join(timeout=60)
    stop.set()
    governor.stop()
    client.close(timeout=2)
    assert refused_at and refused_at[0] - suspended_at < 10


@pytest.mark.parametrize("wait", ["soon", "61"])
def test_a_bad_wait_is_the_same_400_without_the_asgi_server(agent_key, push_agent, client,
                                                            wait):
    answer = client.get("/api/v1/agents/refund-agent/desired-state", {"wait": wait},
                        HTTP_AUTHORIZATION=f"Token {agent_key}")
    assert answer.status_code == 400
    assert answer.json()["error"]["details"] == [
        {"pointer": "/wait", "message": answer.json()["error"]["message"]}]
    ok = client.get("/api/v1/agents/refund-agent/desired-state", {"wait": "5"},
                    HTTP_AUTHORIZATION=f"Token {agent_key}")
    assert ok.status_code == 200  # a valid wait is answered at once here


def test_stop_under_a_held_poll_returns_at_once_and_the_watch_ends_quietly(
        server, agent_key, push_agent, monkeypatch):
    """stop() does not wait for a pull the control plane holds (an agent's shutdown took up to
    stop()'s whole timeout); closing the client ends the watch without a crash in its thread,
    and the pull's answer is dropped."""
    crashes: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: crashes.append(args.exc_value))
    client = Client(server, agent_key, agent="refund-agent")
    pull, held = client.desired_state, threading.Event()

    def desired_state(agent=None, *, wait=0.0, retry=True):
        if wait > 0:
            held.set()  # the watch's pull goes out, to be held up to `wait` seconds
        return pull(agent, wait=wait, retry=retry)

    client.desired_state = desired_state
    # Each pull is held 5 s (the state does not change): long enough to stop under one,
    # short enough that the thread does not outlive the test by much.
    governor = govern(Agent(FunctionModel(caller, model_name="gpt-4.1")), client=client,
                      name="refund-agent", resources=RESOURCES, interval=5).start()
    eventually(held.is_set, message="the watch never held a pull")
    watch = governor._threads[0]
    governor.stop()  # its default timeout is 10 s, longer than the hold
    assert watch.is_alive(), "stop() waited for the held pull's answer"
    applied = governor.applied
    client.close(timeout=2)
    watch.join(timeout=60)
    assert not watch.is_alive() and crashes == []
    assert governor.applied is applied
