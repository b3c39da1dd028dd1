"""An agent busy working is not silent: on real workers and the real cron (short heartbeats),
an agent that reported its state once and then sends a behaviour event every second is
alive, while one that reported once and then said nothing goes silent at the same check;
alice reads on each agent's page what was last heard and when."""

import re
import threading
import time
import uuid
from datetime import UTC, datetime

import httpx
import pytest

from reconciliation.models import Silence
from registry import actions
from tests.conftest import approved_agent, eventually, start_daphne, stop_daphne
from tests.reconciliation.test_fleet_on_workers import start_cron  # noqa: F401 - a fixture
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser
# Short, with room on a loaded machine: the busy agent's event a second must be stored within
# a heartbeat, through the one web process that also serves alice's browser (its sign-in and
# pages, one request thread); a CI run under load once held its events back past 6 s.
HEARTBEAT = 15
SHORT = {"HEARTBEAT_PUSH_SECONDS": str(HEARTBEAT), "SILENCE_CHECK_SECONDS": "1",
         "RECONCILE_RESYNC_SECONDS": "3600"}


class BusyAgent(threading.Thread):
    """The agent's own loop: one behaviour event a second through the API, until stopped."""

    def __init__(self, url: str, key: str, name: str) -> None:
        super().__init__(daemon=True)
        self.url, self.key, self.name = url, key, name
        self.done, self.sent, self.failures = threading.Event(), 0, []
        self.slowest = 0.0  # the longest an event took to be answered, in seconds

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30,
                          headers={"Authorization": f"Token {self.key}"}) as client:
            while not self.done.is_set():
                began = time.monotonic()
                response = client.post("/api/v1/events", json=[{
                    "id": uuid.uuid4().hex, "agent": self.name, "kind": "tool_call",
                    "tool": "orders.lookup", "ts": datetime.now(UTC).isoformat()}])
                if response.status_code >= 300:
                    self.failures.append(f"{response.status_code} {response.text}")
                self.slowest = max(self.slowest, time.monotonic() - began)
                self.sent += 1
                self.done.wait(1)


def report(url: str, key: str, name: str) -> None:
    response = httpx.put(f"{url}/api/v1/agents/{name}/observed-state", timeout=30,
                         json={"tools": ["orders.lookup", "payments.refund"]},
                         headers={"Authorization": f"Token {key}"})
    assert response.status_code == 202, response.text


def test_an_agent_sending_events_is_alive_and_its_page_says_what_was_last_heard(
        people, start_worker, start_cron, monkeypatch):  # noqa: F811 - the imported fixture
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    busy = approved_agent(people, "busy-agent", connector={"type": "push"})
    quiet = approved_agent(people, "quiet-agent", connector={"type": "push"})
    server = start_daphne(**SHORT)  # the page judges "no report for long" by the same heartbeat
    try:
        keys = {agent.name: actions.issue_agent_token(agent, actor=people.alice)[1]
                for agent in (busy, quiet)}
        worker = start_worker("default", "reconcile", "ingest", **SHORT)
        for name, key in keys.items():
            report(server.url, key, name)
        loop = BusyAgent(server.url, keys["busy-agent"], "busy-agent")
        loop.start()
        start_cron(**SHORT)
        # the same checks that find the quiet agent silent find the busy one alive
        eventually(lambda: Silence.objects.filter(agent=quiet, ended_at__isnull=True).exists(),
                   timeout=180, message=lambda: f"the quiet agent was never found silent:\n"
                                                f"{worker.output()}")
        # two heartbeats past its only report (a send a second, slower on a loaded machine)
        eventually(lambda: loop.sent >= 2 * HEARTBEAT, timeout=300)

        def busy_silences() -> str:
            return (f"the agent sending events was reported silent: "
                    f"{list(Silence.objects.filter(agent=busy).values())}; its slowest event "
                    f"took {loop.slowest:.1f} s to be answered")

        assert not Silence.objects.filter(agent=busy).exists(), busy_silences()
        assert loop.failures == []
        with sync_playwright() as playwright:
            browser = Browser(playwright, server.url)
            alice = browser.page("alice")
            alice.goto(f"{server.url}/agents/busy-agent/")
            heard = alice.locator("#agent-heard")
            expect(heard).to_have_text(re.compile(
                r"^last event \d+ s ago; no observed-state report for \d+ (s|min)$"))
            ready = alice.locator("table.conditions tr", has_text="Ready")
            try:
                expect(ready).not_to_contain_text("Silent")
            except AssertionError as error:  # say what the product heard, not only the page
                raise AssertionError(busy_silences()) from error
            alice.goto(f"{server.url}/agents/quiet-agent/")
            expect(alice.locator("#agent-heard")).to_have_text(
                re.compile(r"^no observed-state report for \d+ (s|min)$"))
            expect(alice.locator("table.conditions tr", has_text="Ready")).to_contain_text(
                "Silent")
            browser.browser.close()
        loop.done.set()
        loop.join(timeout=30)
        assert browser.problems == []
    finally:
        loop_stop = locals().get("loop")
        if loop_stop is not None:
            loop_stop.done.set()
        stop_daphne(server)
