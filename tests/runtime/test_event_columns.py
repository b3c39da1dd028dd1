"""Every column of a stored event is what was sent: the store's COPY (binary on PostgreSQL)
and its chunks (SQLite) write each type as it is, at its bounds."""

import json

import pytest
from django.utils import timezone

from runtime.events import TEXT_FIELDS
from runtime.models import BehaviourEvent

pytestmark = pytest.mark.django_db


def test_every_column_is_stored_as_sent(agent_client, refund_agent):
    now = timezone.now().replace(microsecond=123456)
    texts = {name: ("é" * (limit - 1) + "x") for name, limit in TEXT_FIELDS.items()}
    full = {"id": "ü" * 128, "agent": "refund-agent", "ts": now.isoformat(), "kind": "action",
            **texts, "action": "refund", "amount": "800.50", "input_tokens": 10**12,
            "output_tokens": 0, "cost": 0.125,
            "attributes": {"k": "v😀", "n": 10**30, "f": -1.5, "b": False, "z": None}}
    bare = {"id": "bare", "agent": "refund-agent", "ts": now.isoformat(), "kind": "model_call"}
    response = agent_client.post("/api/v1/events", json.dumps([full, bare]),
                                 content_type="application/json")
    assert [r["status"] for r in response.json()["results"]] == ["accepted", "accepted"]
    row = BehaviourEvent.objects.get(event_id="ü" * 128)
    assert row.agent_id == refund_agent.pk and row.agent_name == "refund-agent"
    assert row.ts == now and row.kind == "action"
    assert {name: getattr(row, name) for name in TEXT_FIELDS} == {**texts, "action": "refund"}
    assert (row.amount, row.input_tokens, row.output_tokens, row.cost) == (800.5, 10**12, 0,
                                                                          0.125)
    assert row.attributes == full["attributes"]
    assert row.sender and row.source == "api" and not row.foreign
    row = BehaviourEvent.objects.get(event_id="bare")
    assert {name: getattr(row, name) for name in TEXT_FIELDS} == dict.fromkeys(TEXT_FIELDS, "")
    assert (row.amount, row.input_tokens, row.output_tokens, row.cost, row.attributes) == (
        None, None, None, None, None)
