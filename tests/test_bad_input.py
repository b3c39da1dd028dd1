"""Hostile bodies on every write endpoint: each gets the documented JSON error, never a 500,
and changes nothing."""

import json
from pathlib import Path

import pytest
import yaml
from django.utils import timezone

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
    # An integer no float holds (float() of it overflows), and one past Python's 4,300 digits.
    ("an integer past a float", b'{"amount": 1' + b"0" * 400 + b', "tools": [1' + b"0" * 400
     + b"]}", "application/json", {400, 422}),
    ("a number of 5,000 digits", b"[" + b"9" * 5000 + b"]", "application/json", {400, 422}),
    # JSON's escape of half a surrogate pair: a string no UTF-8 holds (storing it was a 500).
    ("a lone surrogate", b'{"action": "\\ud800", "tools": ["\\udfff"], "apiVersion": "a\\ud800",'
     b' "\\ud800": 1}', "application/json", {400, 422}),
    # JSON's escape of NUL: no PostgreSQL text holds it (storing it was a 500).
    ("a NUL character", b'{"action": "a\\u0000", "tools": ["\\u0000"], "apiVersion": "\\u0000"}',
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
    if path == "/v1/traces" and case in ("huge number", "an integer past a float",
                                         "a lone surrogate", "a NUL character"):
        statuses = {200}  # an OTLP object without resourceSpans is a valid, empty export
    before = snapshot()
    response = client.generic(method.upper(), path, body, content_type=content_type)
    assert response.status_code in statuses | {403}, (case, response.status_code,
                                                      response.content[:300])
    assert response.status_code != 500
    if response.status_code != 200:
        assert response.json()["error"]["code"] in {"malformed", "invalid", "forbidden"}
    assert snapshot() == before


def test_an_event_with_an_integer_past_a_float_is_rejected_alone(agent_client):
    """An amount or a cost of 10**400 is refused with its reason (float() of it overflowed:
    a 500 for the whole batch); the batch's other event is stored."""
    now = timezone.now().isoformat()
    base = {"agent": "refund-agent", "ts": now, "kind": "action", "action": "refund"}
    body = ('[' + json.dumps({**base, "id": "fine"}) + ", "
            + json.dumps({**base, "id": "amount"})[:-1] + ', "amount": 1' + "0" * 400 + "}, "
            + json.dumps({**base, "id": "cost"})[:-1] + ', "cost": 1' + "0" * 400 + "}]")
    response = agent_client.post("/api/v1/events", body, content_type="application/json")
    assert response.status_code == 200, response.content[:300]
    results = {r["id"]: r for r in response.json()["results"]}
    assert results["fine"]["status"] == "accepted"
    assert results["amount"] == {"id": "amount", "status": "rejected", "reason":
                                 "amount cannot be read: an amount is a number between 0 and 1e12"}
    assert results["cost"]["status"] == "rejected"
    assert results["cost"]["reason"].startswith("cost must be a number")
    assert list(BehaviourEvent.objects.values_list("event_id", flat=True)) == ["fine"]


def test_a_decision_for_an_integer_past_a_float_is_malformed(agent_client):
    """float() of 10**400 overflowed inside the one reader of amounts: a 500 for the agent."""
    before = snapshot()
    for field in ("amount", "wait_seconds"):
        body = '{"action": "refund", "' + field + '": 1' + "0" * 400 + "}"
        response = agent_client.post("/api/v1/agents/refund-agent/decisions", body,
                                     content_type="application/json")
        assert response.status_code == 400, response.content[:300]
        assert response.json()["error"]["details"][0]["pointer"] == f"/{field}"
    assert snapshot() == before


def test_a_manifest_limit_of_an_integer_past_a_float_is_invalid(api_as, people):
    """A limit of 10**400 is refused with its pointer (math.isfinite of it overflowed)."""
    document = yaml.safe_load((Path(__file__).resolve().parent.parent / "examples" / "manifests"
                               / "refund-agent.yaml").read_text())
    document["metadata"]["name"] = "huge-limit-agent"
    document["spec"]["limits"][0]["max_calls"] = 10**400
    before = snapshot()
    response = api_as(people.alice).post("/api/v1/manifests", yaml.safe_dump(document),
                                         content_type="application/yaml")
    assert response.status_code == 422, response.content[:300]
    assert "/spec/limits/0/max_calls" in [d["pointer"] for d in
                                          response.json()["error"]["details"]]
    assert snapshot()[:4] == before[:4]  # nothing stored (the refusal itself is audited)


@pytest.mark.parametrize("escape, content_type", [
    ("\\0", "application/yaml"), ("\\x00", "application/yaml"),
    ("\\u0000", "application/json")])
@pytest.mark.parametrize("where, pointer", [
    ("name", "/metadata/name"), ("description", "/metadata/description"),
    ("tool", "/spec/tools/0"), ("key", "/metadata/labels")])
def test_a_manifest_with_a_nul_is_malformed_and_names_where(api_as, people, escape,
                                                            content_type, where, pointer):
    """YAML's "\\0" and "\\x00" and JSON's "\\u0000" escapes are valid syntax for a NUL no
    PostgreSQL text holds: the upload is a 400 naming where (storing its name or description,
    even in the refusal's audit row, was a 500), and nothing is stored."""
    document = yaml.safe_load((Path(__file__).resolve().parent.parent / "examples" / "manifests"
                               / "refund-agent.yaml").read_text())
    marker = "MARKER"
    if where == "name":
        document["metadata"]["name"] = f"refund-{marker}"
    elif where == "description":
        document["metadata"]["description"] = f"refunds {marker}"
    elif where == "tool":
        document["spec"]["tools"][0] = f"orders.{marker}"
    else:
        document["metadata"]["labels"] = {f"team{marker}": "payments"}
    text = (json.dumps(document) if content_type == "application/json"
            else yaml.safe_dump(document, default_style='"'))
    assert text.count(marker) == 1
    before = snapshot()
    response = api_as(people.alice).post("/api/v1/manifests", text.replace(marker, escape),
                                         content_type=content_type)
    assert response.status_code == 400, response.content[:300]
    details = response.json()["error"]["details"]
    assert [d["pointer"] for d in details] == [pointer], details
    assert "no NUL character" in details[0]["message"]
    assert snapshot()[:4] == before[:4]  # nothing stored (the refusal itself is audited)


def test_an_event_with_a_lone_surrogate_or_a_nul_is_rejected_alone(agent_client):
    """Each string of an event (its id, agent, texts, attributes) must be text a database
    holds; an event with JSON's \\ud800 or \\u0000 escape is refused with why, the others are
    stored."""
    now = timezone.now().isoformat()
    base = {"agent": "refund-agent", "ts": now, "kind": "tool_call", "tool": "lookup"}
    events = [json.dumps({**base, "id": "fine"}),
              json.dumps({**base, "id": "x"}).replace('"x"', '"\\ud800"'),
              json.dumps({**base, "id": "tool", "tool": "x"}).replace('"x"', '"a\\udfff"'),
              json.dumps({**base, "id": "attr", "attributes": {"k": "x"}}).replace(
                  '"x"', '"\\ud800"'),
              json.dumps({**base, "id": "agent", "agent": "x"}).replace('"x"', '"b\\ud800"'),
              json.dumps({**base, "id": "nul", "record": "x"}).replace('"x"', '"a\\u0000"')]
    response = agent_client.post("/api/v1/events", "[" + ", ".join(events) + "]",
                                 content_type="application/json")
    assert response.status_code == 200, response.content[:300]
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["accepted"] + ["rejected"] * 5
    assert [r["reason"].split(" ")[0] for r in results[1:]] == ["id", "tool", "attributes",
                                                                "agent", "record"]
    assert all("no NUL character" in r["reason"] for r in results[1:])
    assert results[1]["id"] is None  # the id itself cannot be written back
    assert list(BehaviourEvent.objects.values_list("event_id", flat=True)) == ["fine"]


def test_an_event_nested_too_deeply_is_a_clean_error(agent_client):
    """Nesting a hundred thousand deep inside an event's attributes or amount (where any JSON
    value may come, so the fast path's typed decoder recurses) is a 400, not a 500."""
    now = timezone.now().isoformat()
    for field in ("attributes", "amount"):
        head = json.dumps({"id": "a", "agent": "refund-agent", "ts": now, "kind": "model_call"})
        body = "[" + head[:-1] + f', "{field}": ' + "[" * 100_000 + "]" * 100_000 + "}]"
        before = snapshot()
        response = agent_client.post("/api/v1/events", body, content_type="application/json")
        assert response.status_code == 400, response.content[:300]
        assert response.json()["error"]["code"] == "malformed"
        assert snapshot() == before


@pytest.mark.parametrize("path", [
    "/api/v1/agents/refund%00agent", "/api/v1/agents/refund%00agent/desired-state",
    "/api/v1/agents?owner=a%00b", "/api/v1/agents/refund-agent/events?kind=a%00b",
    "/api/v1/escalations?a%00b=1", "/agents/refund%00agent/", "/fleet/?q=a%00b"])
def test_a_url_with_a_nul_is_refused_before_any_view_reads_it(api_as, people, client,
                                                               refund_agent, path):
    """A NUL (`%00`) in a path or query reached the database as a name or a filter: looking
    an agent up by it was a 500. The API answers the documented 400, the console a plain 400."""
    answer = api_as(people.bob).get(path)
    assert answer.status_code == 400, answer.content[:300]
    client.force_login(people.bob)
    page = client.get(path)
    assert page.status_code == 400
    if path.startswith("/api/"):
        assert answer.json()["error"]["code"] == "malformed"
        assert "no NUL character" in answer.json()["error"]["message"]
    else:
        assert "no NUL character" in page.content.decode()
