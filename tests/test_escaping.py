"""Markup in every free-text field that reaches a page is shown as text, never run: agent
descriptions, people's names, comments and reasons, observed-state values, finding values,
decision requests, guardrail texts, event values, and what people type into filters and forms.
Data embedded for scripts is JSON that cannot close its <script> element."""

import json
import re
import uuid
from datetime import UTC, datetime
from html.parser import HTMLParser

import django_rq
import pytest
import yaml
from django.contrib.auth.models import User
from rq import SimpleWorker

from reconciliation import actions
from reconciliation.models import Escalation, Finding
from registry import actions as registry_actions
from registry.manifest import validate_manifest
from registry.models import Agent
from runtime.models import BehaviourEvent, UnregisteredAgent
from sandbox import actions as sandbox_actions
from tests.conftest import REFUND_AGENT_YAML, shadow_on

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(2)>'
# Resource names may not hold spaces; the same attack without them.
IMG_NO_SPACE = '"><img/src=x/onerror=alert(3)>'
PAYLOADS = (SCRIPT, IMG, IMG_NO_SPACE)
EVIL = f"{SCRIPT} {IMG}"


class Markup(HTMLParser):
    """What a page's HTML really contains: elements, attributes, and inline script bodies."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._script = dict(attrs)
            self.scripts.append((self._script, ""))

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            attrs, body = self.scripts[-1]
            self.scripts[-1] = (attrs, body + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None


def problems_in(path: str, body: str) -> list[str]:
    """Every way the page shows that markup got through, or [] when it is all text."""
    found = [f"{path}: raw {payload!r}" for payload in PAYLOADS if payload in body]
    page = Markup()
    page.feed(body)
    for tag, attrs in page.tags:
        if tag == "img":
            found.append(f"{path}: an <img> element {attrs}")
        handlers = [name for name in attrs if name.startswith("on")]
        if handlers:
            found.append(f"{path}: <{tag}> has event handler attributes {handlers}")
    for attrs, content in page.scripts:
        if attrs.get("src"):
            continue
        if attrs.get("type") != "application/json":
            found.append(f"{path}: an inline script that is not JSON data: {content[:80]!r}")
            continue
        if "<" in content:
            found.append(f"{path}: JSON data holding a raw '<' (could close its script)")
        json.loads(content)  # and it is data a script can read back
    return found


def manifest(**spec_changes):
    document = yaml.safe_load(REFUND_AGENT_YAML)
    document["metadata"]["description"] = EVIL
    document["spec"].update(spec_changes)
    return validate_manifest(document)


EVIL_SPEC = {
    "framework": SCRIPT, "model": SCRIPT, "version": IMG,
    "data": [{"resource": "orders_db", "access": "read"},
             {"resource": "payments", "access": "write"},
             {"resource": IMG_NO_SPACE, "access": "read"}],
    "grants": [{"resource": SCRIPT, "access": "read", "reason": EVIL,
                "expires_at": "2030-01-01T00:00:00Z"}],
    "enforcement": {"default": "correct", "actions": "escalate", "behaviour": "log"},
}


@pytest.fixture
def world(people, api_as, redis_client, django_capture_on_commit_callbacks):
    """A cluster where markup was typed, reported or sent into every free-text field."""
    User.objects.filter(pk=people.alice.pk).update(first_name=SCRIPT, last_name=IMG)
    dana = api_as(people.dana)
    guardrail = dana.post("/api/v1/guardrails", {
        "name": "no-markup-models", "description": EVIL, "message": EVIL, "effect": "warn",
        "expression": f"spec.model != {json.dumps(SCRIPT)}"}, format="json")
    assert guardrail.status_code == 201, guardrail.content

    (outcome,) = registry_actions.apply_manifests(
        [manifest(**EVIL_SPEC)], actor=people.alice, source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob, comment=EVIL)
    agent = Agent.objects.get(name="refund-agent")
    # A pending proposal (with a comment) and a rejected one (with the reason).
    changed = {**agent.active_version.spec, "version": SCRIPT,
               "data": [*agent.active_version.spec["data"],
                        {"resource": SCRIPT, "access": "write"}]}
    registry_actions.propose(agent, changed, agent.active_version.metadata,
                             actor=people.alice, source="api", comment=EVIL)
    rejected = registry_actions.propose(
        agent, {**changed, "model": IMG}, agent.active_version.metadata,
        actor=people.alice, source="api", comment=EVIL).version
    registry_actions.reject_proposal(rejected.pk, actor=people.carol, comment=EVIL)
    registry_actions.propose(agent, changed, agent.active_version.metadata,
                             actor=people.alice, source="api", comment=EVIL)

    # The platform runs something else: tool, data and model strings with markup; the refund
    # rule dropped (escalated to a human).
    sandbox_actions.sandbox_deploy(agent, actor="system:test", reason=EVIL, changes={
        "tools": ["orders.lookup", "payments.refund", SCRIPT, IMG],
        "data": [*EVIL_SPEC["data"], {"resource": IMG_NO_SPACE, "access": "admin"}],
        "model": IMG, "version": SCRIPT,
        "actions": {"payments.refund": {"max": 5000}}})
    shadow_on(people, agent)  # keep it to show
    actions.reconcile_agent(agent.pk, trigger="observation")
    actions.set_shadow(actor=people.alice, agent=agent, enabled=False)
    actions.reconcile_agent(agent.pk, trigger="manual")
    assert any("alert" in json.dumps(f.actual) for f in Finding.objects.filter(agent=agent))
    assert Escalation.objects.filter(agent=agent, status="open").exists()
    actions.open_escalation(agent, None, reason=EVIL)
    finding = Finding.objects.filter(agent=agent).first()
    actions.acknowledge_finding(finding.pk, actor=people.dana, reason=EVIL)
    resolved = actions.open_escalation(agent, None, reason=EVIL)
    actions.resolve_escalation(resolved.pk, actor=people.carol, resolution="revert",
                               comment=EVIL)

    # The agent asks: one refund waits for a human, one names a tool that is not approved.
    _, key = registry_actions.issue_agent_token(agent, actor=people.alice)
    agent_api = api_as(people.alice)
    agent_api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    pending = agent_api.post("/api/v1/agents/refund-agent/decisions", {
        "action": "payments.refund", "amount": 900, "resource": IMG_NO_SPACE,
        "record": SCRIPT}, format="json")
    assert pending.json()["outcome"] == "pending", pending.content
    denied = agent_api.post("/api/v1/agents/refund-agent/decisions",
                            {"tool": SCRIPT, "record": IMG}, format="json")
    assert denied.json()["outcome"] == "deny"

    # Events with markup in their values, and a platform reporting agents nobody registered.
    now = datetime.now(UTC).isoformat()
    events = [{"id": uuid.uuid4().hex, "agent": "refund-agent", "ts": now, "kind": kind,
               "tool": SCRIPT, "resource": IMG_NO_SPACE, "record": IMG, "action": SCRIPT}
              for kind in ("tool_call", "data_access", "action")]
    events.append({"id": uuid.uuid4().hex, "agent": "shadow-agent", "ts": now,
                   "kind": "tool_call", "tool": SCRIPT})
    with django_capture_on_commit_callbacks(execute=True):
        sent = agent_api.post("/api/v1/events", events[:3], format="json")
        platform = api_as(people.admin).post("/api/v1/events", events[3:], format="json")
    assert sent.json()["accepted"] == 3 and platform.json()["accepted"] == 1
    queue = django_rq.get_queue("ingest")
    SimpleWorker([queue], connection=queue.connection).work(burst=True)
    assert Finding.objects.filter(agent=agent, behaviour=True).exists()
    return agent


def pages(agent: Agent) -> list[str]:
    proposals = list(agent.versions.order_by("pk").values_list("pk", flat=True))
    query = "q={0}&agent={0}&actor={0}&kind={0}&owner={0}&label={0}".format(
        "%3Cscript%3Ealert(1)%3C%2Fscript%3E%22%3E%3Cimg+src%3Dx+onerror%3Dalert(2)%3E")
    return [
        "/", "/agents/", "/agents/refund-agent/", "/findings/", "/findings/?source=behaviour",
        "/approvals/", "/escalations/", "/escalations/?snoozed=1", "/guardrails/",
        "/guardrails/no-markup-models/edit", "/guardrails/no-markup-models/delete", "/lab/",
        "/audit/", "/manifests/new?agent=refund-agent",
        *[f"/proposals/{pk}/" for pk in proposals],
        # What someone types into a filter is shown back in the form, as text.
        f"/agents/?{query}", f"/findings/?{query}", f"/audit/?{query}",
        f"/escalations/?{query}",
    ]


def test_markup_in_every_free_text_field_is_escaped_on_every_page(world, client, people):
    checked = {}
    problems: list[str] = []
    for who in (people.admin, people.bob, people.alice):
        client.force_login(who)
        for path in pages(world):
            response = client.get(path)
            if response.status_code == 403:
                continue  # this person does not see the page; another one checks it
            assert response.status_code == 200, (who.username, path, response.status_code)
            body = response.content.decode()
            problems += problems_in(path, body)
            checked[path] = checked.get(path, False) or "&lt;script&gt;" in body
    assert problems == []
    # The markup really reached these pages (as text), so the checks above mean something.
    shown = {path for path, escaped in checked.items() if escaped}
    for path in ("/agents/refund-agent/", "/findings/", "/approvals/", "/escalations/",
                 "/guardrails/", "/audit/", "/agents/"):
        assert path in shown, path
    assert all(f"/proposals/{pk}/" in shown for pk in world.versions.values_list("pk", flat=True))


def test_the_browsable_api_escapes_markup_too(world, client, people):
    client.force_login(people.admin)
    problems = []
    for path in ("/api/v1/findings", "/api/v1/escalations", "/api/v1/proposals",
                 "/api/v1/unregistered", "/api/v1/agents/refund-agent",
                 "/api/v1/guardrails/no-markup-models", "/api/v1/audit"):
        response = client.get(path, HTTP_ACCEPT="text/html")
        assert response.status_code == 200 and response["Content-Type"].startswith(
            "text/html"), path
        problems += problems_in(path, response.content.decode())
    assert problems == []


def test_markup_never_names_an_agent_and_a_shadow_agents_raw_name_is_escaped(
        world, api_as, people, client):
    admin = api_as(people.admin)
    now = datetime.now(UTC).isoformat()
    sent = admin.post("/api/v1/events", [
        {"id": uuid.uuid4().hex, "agent": name, "ts": now, "kind": "tool_call", "tool": "x"}
        for name in (SCRIPT, IMG, "Shadow<b>")], format="json").json()
    # Kept as shadow agents under slugs (as OTLP display names are), the name as sent beside.
    assert sent["accepted"] == 3 and sent["rejected"] == 0
    reported = admin.put(f"/api/v1/agents/{IMG_NO_SPACE}/observed-state", {"running": True},
                         format="json")
    assert reported.status_code == 404  # not even a route: names in URLs are slugs
    shadows = dict(UnregisteredAgent.objects.values_list("name", "display_name"))
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9-]*", name) for name in shadows)
    assert {SCRIPT, IMG, "Shadow<b>"} <= set(shadows.values())
    assert not BehaviourEvent.objects.filter(agent_name__contains="<").exists()
    client.force_login(people.admin)
    response = client.get("/api/v1/unregistered", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert problems_in("/api/v1/unregistered", response.content.decode()) == []


def test_forms_echo_what_was_typed_as_text(world, client, people):
    client.force_login(people.alice)
    bad_yaml = REFUND_AGENT_YAML.replace("name: refund-agent", f"name: '{SCRIPT}'").replace(
        "model: gpt-4.1", f"model: '{IMG}'\n  {IMG_NO_SPACE}: 1")
    applied = client.post("/manifests/new", {"manifest": bad_yaml})
    assert applied.status_code == 200 and "&lt;script&gt;" in applied.content.decode()
    assert problems_in("/manifests/new", applied.content.decode()) == []
    client.force_login(people.dana)
    form = client.post("/guardrails/new", {"name": SCRIPT, "description": EVIL,
                                            "expression": f"spec.model == {IMG!r} &&",
                                            "effect": "deny", "message": EVIL,
                                            "required_approvals": 2})
    assert form.status_code == 200 and "&lt;script&gt;" in form.content.decode()
    assert problems_in("/guardrails/new", form.content.decode()) == []
    client.logout()
    login = client.get("/login/", {"next": f"/{IMG}"})
    assert problems_in("/login/", login.content.decode()) == []
