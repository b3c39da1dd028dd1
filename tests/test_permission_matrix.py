"""Who may do what: every API endpoint and page, for every role, an anonymous client, the
agent's own token and another agent's token. One table, exact outcomes."""

import uuid
from datetime import UTC, datetime

import pytest
import yaml
from rest_framework.test import APIClient

from registry import actions as registry_actions
from tests.conftest import REFUND_AGENT_YAML, refund_manifest

pytestmark = pytest.mark.django_db

WHO = ("anonymous", "alice", "bob", "dana", "admin", "own_agent", "other_agent")


def event_body() -> list[dict]:
    return [{"id": uuid.uuid4().hex, "agent": "refund-agent", "kind": "tool_call",
             "ts": datetime.now(UTC).isoformat(), "tool": "orders.lookup"}]


# ((method, path, body), outcome for each of WHO, in order).
API = [
    (("get", "/api/v1/agents", None), (401, 200, 200, 200, 200, 403, 403)),
    (("get", "/api/v1/agents/refund-agent", None), (401, 200, 200, 200, 200, 403, 403)),
    (("post", "/api/v1/manifests?dry_run=1", "manifest"), (401, 200, 403, 403, 200, 403, 403)),
    (("post", "/api/v1/agents/refund-agent/proposals", "spec"),
        (401, 200, 403, 403, 200, 200, 403)),
    (("get", "/api/v1/proposals", None), (401, 200, 200, 200, 200, 403, 403)),
    (("post", "/api/v1/proposals/{pending}/approve", {}), (401, 403, 200, 403, 200, 403, 403)),
    (("post", "/api/v1/proposals/{pending}/reject", {"comment": "no"}),
        (401, 403, 200, 403, 200, 403, 403)),
    (("get", "/api/v1/guardrails", None), (401, 200, 200, 200, 200, 403, 403)),
    (("post", "/api/v1/guardrails", {"name": "g", "expression": "true", "effect": "warn",
                                    "message": "m"}), (401, 403, 403, 201, 201, 403, 403)),
    (("get", "/api/v1/agents/refund-agent/desired-state", None),
        (401, 200, 200, 200, 200, 200, 403)),
    (("put", "/api/v1/agents/refund-agent/observed-state", {"running": True}),
        (401, 202, 403, 403, 202, 202, 403)),
    (("post", "/api/v1/agents/refund-agent/reconcile", None), (401, 202, 403, 202, 202, 403, 403)),
    (("post", "/api/v1/agents/refund-agent/shadow", {"enabled": True}),
        (401, 200, 403, 200, 200, 403, 403)),
    (("get", "/api/v1/findings", None), (401, 403, 200, 200, 200, 403, 403)),
    (("get", "/api/v1/escalations", None), (401, 403, 200, 200, 200, 403, 403)),
    (("post", "/api/v1/events", "events"), (401, 200, 403, 403, 200, 200, 403)),
    (("post", "/api/v1/agents/refund-agent/decisions", {"action": "payments.refund",
                                                       "amount": 10}),
        (401, 201, 403, 403, 201, 201, 403)),
    (("get", "/api/v1/unregistered", None), (401, 403, 200, 200, 200, 403, 403)),
    (("get", "/api/v1/dashboard", None), (401, 200, 200, 200, 200, 403, 403)),
    (("get", "/api/v1/control", None), (401, 200, 200, 200, 200, 403, 403)),
    (("post", "/api/v1/control/shadow", {"enabled": False}), (401, 403, 403, 200, 200, 403, 403)),
    (("get", "/api/v1/audit", None), (401, 403, 403, 200, 200, 403, 403)),
    (("get", "/api/v1/audit/verify", None), (401, 403, 403, 200, 200, 403, 403)),
    (("get", "/api/schema", None), (200, 200, 200, 200, 200, 200, 200)),
    (("get", "/healthz", None), (200, 200, 200, 200, 200, 200, 200)),
]


PAGES = {
    "/": (302, 200, 200, 200, 200),
    "/agents/": (302, 200, 200, 200, 200),
    "/agents/refund-agent/": (302, 200, 200, 200, 200),
    "/manifests/new": (302, 200, 403, 403, 200),
    "/approvals/": (302, 403, 200, 403, 200),
    "/escalations/": (302, 403, 200, 200, 200),
    "/findings/": (302, 403, 200, 200, 200),
    "/lab/": (302, 403, 403, 200, 200),
    "/guardrails/": (302, 200, 200, 200, 200),
    "/audit/": (302, 403, 403, 200, 200),
}


@pytest.fixture
def clients(people, refund_agent, api_as):
    manifest = refund_manifest()
    object.__setattr__(manifest, "name", "other-agent")
    registry_actions.apply_manifests([manifest], actor=people.alice, source="yaml")
    other = refund_agent.__class__.objects.get(name="other-agent")
    made = {"anonymous": APIClient()}
    for name in ("alice", "bob", "dana", "admin"):
        made[name] = api_as(getattr(people, name))
    for name, agent in (("own_agent", refund_agent), ("other_agent", other)):
        _, key = registry_actions.issue_agent_token(agent, actor=people.alice)
        made[name] = APIClient()
        made[name].credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return made


def body_for(kind, refund_agent):
    if kind == "manifest":
        return yaml.safe_load(REFUND_AGENT_YAML)
    if kind == "spec":
        return {"spec": refund_agent.active_version.spec}
    if kind == "events":
        return event_body()
    return kind


@pytest.mark.parametrize("endpoint, outcomes", API, ids=[f"{m} {p}" for (m, p, _), _ in API])
@pytest.mark.parametrize("who", WHO)
def test_api_permissions(clients, people, refund_agent, endpoint, outcomes, who):
    method, path, kind = endpoint
    if "{pending}" in path:
        pending = registry_actions.propose(
            refund_agent, refund_manifest(model="gpt-5").spec,
            refund_agent.active_version.metadata, actor=people.alice, source="api").version
        path = path.format(pending=pending.pk)
    client = clients[who]
    body = body_for(kind, refund_agent)
    if kind == "manifest":
        response = client.generic("POST", path, yaml.safe_dump(body),
                                  content_type="application/yaml")
    else:
        response = getattr(client, method)(path, body, format="json") if body is not None \
            else getattr(client, method)(path)
    expected = outcomes[WHO.index(who)]
    assert response.status_code == expected, (who, method, path, response.content[:300])


@pytest.mark.parametrize("path", list(PAGES))
@pytest.mark.parametrize("who", WHO[:5])
def test_page_permissions(client, people, refund_agent, path, who):
    if who != "anonymous":
        client.force_login(getattr(people, who))
    response = client.get(path)
    assert response.status_code == PAGES[path][WHO.index(who)], (who, path)


@pytest.mark.parametrize("path", list(PAGES))
def test_agent_tokens_never_open_pages(clients, path):
    response = clients["own_agent"].get(path)
    assert response.status_code == 302 and "/login/" in response["Location"]
