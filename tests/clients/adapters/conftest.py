"""Shared steps of the adapter stories: the refund agent on the push connector, governed in
this process against a real daphne server; bob answers decisions through the API."""

import threading

import httpx
import pytest
from django.db import connection

from reconciliation import actions as reconciliation
from reconciliation.models import Escalation, Finding
from runtime.models import BehaviourEvent
from tests.conftest import eventually

# The control plane's tool names (from the example manifest) mapped to resources the gate
# checks against the approved data scopes.
RESOURCES = {"orders.lookup": "orders_db", "payments.refund": "payments"}
FAST = {"interval": 0.1, "heartbeat": 0.5, "decision_poll": 0.1, "decision_wait": 60}


def latest_report(agent) -> dict:
    return agent.observations.order_by("-observed_at").first().state


def reconcile(agent) -> str:
    return reconciliation.reconcile_agent(agent.pk, trigger="observation").result


def events(agent, **filters) -> list:
    return list(BehaviourEvent.objects.filter(agent_name=agent.name, **filters)
                .order_by("received_at"))


class Bob:
    """bob, answering the first open decision escalation through the API, in a thread."""

    def __init__(self, server: str, key: str) -> None:
        self.server, self.key = server, key
        self.thread = threading.Thread(target=self._answer, daemon=True)
        self.answered: int | None = None

    def _answer(self) -> None:
        try:
            escalation = eventually(
                lambda: Escalation.objects.filter(decision__isnull=False, status="open").first())
            answer = httpx.post(f"{self.server}/api/v1/escalations/{escalation.pk}/resolve",
                                json={"resolution": "allow",
                                      "comment": "damaged, photo attached"},
                                headers={"Authorization": f"Token {self.key}"})
            self.answered = answer.status_code
        finally:
            connection.close()  # this thread's own connection, or the test database lingers

    def __enter__(self) -> "Bob":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.thread.join(timeout=90)


@pytest.fixture
def bob(server, keys):
    return lambda: Bob(server, keys.bob)


def gained_tool_is_corrected_in_place(agent, tools_now) -> None:
    """The gained tool is reported, the reconciler publishes a correction, the governor applies
    it to the object, and the next observation (verified by the next pass) shows it gone."""
    eventually(lambda: "crm.search" in latest_report(agent)["tools"],
               message="the gained tool was never reported")
    assert reconcile(agent) == "correcting"
    eventually(lambda: "crm.search" not in tools_now(), message="the object kept the tool")
    eventually(lambda: "crm.search" not in latest_report(agent)["tools"])
    eventually(lambda: reconcile(agent) == "converged")
    finding = Finding.objects.get(agent=agent, pointer="/tools/crm.search")
    assert finding.status == "corrected"
