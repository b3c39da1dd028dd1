"""Hostile bodies on every write endpoint: each gets the documented JSON error, never a 500,
and changes nothing."""

import pytest

from audit.models import AuditEntry
from reconciliation.models import ObservedState
from registry.models import DesiredStateVersion
from runtime.models import BehaviourEvent, Decision

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000 + "]" * 100_000
ENDPOINTS = [
    ("put", "/api/v1/agents/refund-agent/observed-state"),
    ("post", "/api/v1/agents/refund-agent/proposals"),
    ("post", "/api/v1/agents/refund-agent/decisions"),
    ("post", "/api/v1/events"),
    ("post", "/api/v1/manifests"),
    ("post", "/v1/traces"),
]
BODIES = [
    ("deeply nested JSON", DEEP.encode(), "application/json", {400}),
    ("invalid UTF-8", b'{"tools": ["\xff\xfe"]}', "application/json", {400}),
    ("huge number", b'{"spec": {"x": 1e999}, "amount": 1e999, "tools": [1e999]}',
     "application/json", {400, 422}),
    ("not JSON at all", b"<xml/>", "application/json", {400, 422}),  # YAML reads it: 422
    ("a JSON string", b'"hello"', "application/json", {400, 422}),
]


def snapshot() -> tuple:
    return (ObservedState.objects.count(), DesiredStateVersion.objects.count(),
            Decision.objects.count(), BehaviourEvent.objects.count(),
            AuditEntry.objects.count())



@pytest.mark.parametrize("method, path", ENDPOINTS)
@pytest.mark.parametrize("case, body, content_type, statuses", BODIES,
                         ids=[b[0] for b in BODIES])
def test_hostile_bodies_get_a_clean_error_and_change_nothing(
        agent_client, api_as, people, method, path, case, body, content_type, statuses):
    client = api_as(people.alice) if path == "/api/v1/manifests" else agent_client
    if path == "/v1/traces" and case == "huge number":
        statuses = {200}  # an OTLP object without resourceSpans is a valid, empty export
    before = snapshot()
    response = client.generic(method.upper(), path, body, content_type=content_type)
    assert response.status_code in statuses | {403}, (case, response.status_code,
                                                      response.content[:300])
    assert response.status_code != 500
    if response.status_code != 200:
        assert response.json()["error"]["code"] in {"malformed", "invalid", "forbidden"}
    assert snapshot() == before
