"""Asking for a decision before a sensitive action, and waiting (with a timeout) for a human's
answer. These tests need POST /api/v1/agents/{name}/decisions and GET /api/v1/decisions/{id}."""

import threading
import time
from datetime import timedelta

import httpx
from django.utils import timezone

from reconciliation.models import Escalation
from runtime.models import Decision
from tests.conftest import eventually


def test_a_small_refund_is_allowed_and_one_above_the_maximum_denied(agent_client):
    small = agent_client.decide("payments.refund", amount=120)
    assert small.allowed and (small.outcome, small.status) == ("allow", "decided")
    huge = agent_client.decide("payments.refund", amount=6000)
    assert not huge.allowed and huge.outcome == "deny" and "maximum" in huge.rule


def test_a_refund_above_the_threshold_waits_for_an_approvers_answer(agent_client, server, keys):
    def bob_allows() -> None:
        escalation = eventually(
            lambda: Escalation.objects.filter(decision__isnull=False, status="open").first())
        answer = httpx.post(f"{server}/api/v1/escalations/{escalation.pk}/resolve",
                            json={"resolution": "allow", "comment": "customer is known"},
                            headers={"Authorization": f"Token {keys.bob}"})
        assert answer.status_code == 200, answer.text

    approver = threading.Thread(target=bob_allows)
    approver.start()
    started = time.monotonic()
    decision = agent_client.decide("payments.refund", amount=900, wait=30, poll=0.1)
    approver.join()
    assert decision.allowed and decision.status == "approved"
    assert decision.raw["decided_by"] == "bob"
    assert time.monotonic() - started < 15


def test_without_an_answer_in_time_the_decision_is_still_pending_and_not_allowed(agent_client):
    started = time.monotonic()
    decision = agent_client.decide("payments.refund", amount=900, wait=0.5, poll=0.1)
    assert 0.5 <= time.monotonic() - started < 5
    assert decision.pending and not decision.allowed and decision.expires_at

    # The control plane denies it once nobody answered before it expired.
    Decision.objects.filter(pk=decision.id).update(
        expires_at=timezone.now() - timedelta(seconds=1))
    expired = agent_client.wait_for_decision(decision.id, timeout=5, poll=0.1)
    assert (expired.outcome, expired.status) == ("deny", "expired")


def test_a_tool_call_is_judged_from_its_arguments_and_the_agents_wait(agent_client):
    # The arguments as the model produced them: the control plane reads "800" as 800.
    held = agent_client.decide(tool="payments.refund", arguments={"order": "A-1",
                                                                  "amount": "800"},
                               wait_seconds=7, wait=0.2, poll=0.1)
    assert held.pending and not held.allowed
    stored = Decision.objects.get(pk=held.id)
    assert stored.request["amount"] == 800.0
    assert timedelta(seconds=6) < stored.expires_at - stored.created_at <= timedelta(seconds=7)
    # A misspelled amount is a deny that says what it saw, not an allow.
    refused = agent_client.decide(tool="payments.refund", arguments={"Amount": 800})
    assert refused.outcome == "deny" and "arguments has 'Amount'" in refused.rule
    # The old call shape still works.
    assert agent_client.decide("payments.refund", amount=120).allowed
