"""CSRF, with checks enforced as a browser meets them (Django's test client skips them by
default): every form a page posts is refused without its token and does its work with the
token the page rendered; session-authenticated API writes need the token too, while calls with
an `Authorization: Token` header (which a forged cross-site request cannot carry) do not."""

from dataclasses import dataclass, field
from datetime import timedelta
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.urls import resolve
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.models import Finding
from registry import actions as registry_actions
from registry.models import Agent
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, PASSWORD, REFUND_AGENT_YAML, refund_manifest

pytestmark = pytest.mark.django_db


@dataclass
class Form:
    """A POST form as the browser would send it: its action and the fields' current values."""

    action: str
    fields: dict[str, str] = field(default_factory=dict)
    buttons: list[tuple[str, str]] = field(default_factory=list)


class Forms(HTMLParser):
    """Every method="post" form of a page."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.page = page
        self.forms: list[Form] = []
        self._form: Form | None = None
        self._text: tuple[str, list[str]] | None = None  # textarea or option being read
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("method", "").lower() == "post":
            self._form = Form(a.get("action") or self.page)
            self.forms.append(self._form)
        if self._form is None:
            return
        name = a.get("name", "")
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind == "checkbox" and "checked" not in a:
                return
            self._form.fields[name] = a.get("value", "")
        elif tag == "textarea" and name:
            self._text = (name, [])
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select:
            if self._select not in self._form.fields or "selected" in a:
                self._form.fields[self._select] = a.get("value", "")
        elif tag == "button" and name:
            self._form.buttons.append((name, a.get("value", "")))

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text[1].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea" and self._text and self._form is not None:
            name, parts = self._text
            self._form.fields[name] = "".join(parts).removeprefix("\n")
            self._text = None
        elif tag == "select":
            self._select = None
        elif tag == "form":
            self._form = None


def forms_on(client: Client, page: str) -> list[Form]:
    response = client.get(page)
    assert response.status_code == 200, (page, response.status_code)
    parser = Forms(page)
    parser.feed(response.content.decode())
    return parser.forms


def route(action: str) -> str:
    return resolve(urlsplit(action).path).url_name


@pytest.fixture
def cluster(people, redis_client):
    """The refund agent with one pending proposal, a corrected drift (findings), an open
    escalation and a guardrail: something for every form to act on."""
    (outcome,) = registry_actions.apply_manifests(
        # the action limit escalates: its finding stays open to acknowledge (corrected ones
        # offer no Acknowledge)
        [refund_manifest(enforcement={"default": "correct", "actions": "escalate"})],
        actor=people.alice,
        source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    agent = Agent.objects.get(name="refund-agent")
    actions.reconcile_agent(agent.pk, trigger="approved")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")
    pending = registry_actions.propose(agent, refund_manifest(model="gpt-5").spec,
                                       agent.active_version.metadata, actor=people.alice,
                                       source="api").version
    escalation = actions.open_escalation(agent, None, reason="look at this")
    registry_actions.create_guardrail(actor=people.dana, name="no-crm", expression="true",
                                      effect="warn", message="m")
    registry_actions.issue_agent_token(agent, actor=people.alice)
    # A token admin held for the agent, suspended as by a hand-over: alice may keep it.
    from registry.actions.tokens import suspend_for_handover

    registry_actions.issue_agent_token(agent, actor=people.admin)
    suspend_for_handover(agent, people.admin, actor="system:test")
    return {"proposal": pending.pk, "escalation": escalation.pk,
            "finding": Finding.objects.filter(agent=agent).first().pk}


NEW_AGENT = REFUND_AGENT_YAML.replace("name: refund-agent", "name: billing-agent")

# Each form: who posts it, the page it is on, which form there (by its action's route and a
# field or button only it has), what the person fills in, and the audit row its work leaves.
FORMS = {
    "sign in": ("anonymous", "/login/", "login", "password",
                {"username": "dana", "password": PASSWORD}, "user.signed_in"),
    "sign out": ("dana", "/", "logout", None, {}, "user.signed_out"),
    "apply a manifest": ("alice", "/manifests/new", "registry-apply", "manifest",
                         {"manifest": NEW_AGENT}, "agent.registered"),
    "approve a proposal": ("bob", "/proposals/{proposal}/", "registry-proposal-approve",
                           "expected_generation", {}, "proposal.approved"),
    "comment on a proposal": ("bob", "/proposals/{proposal}/", "registry-proposal-comment",
                              "body", {"body": "why?", "verdict": "comment"},
                              "proposal.commented"),
    "reject a proposal": ("bob", "/proposals/{proposal}/", "registry-proposal-reject",
                          "comment", {"comment": "not now"}, "proposal.rejected"),
    "withdraw a proposal": ("alice", "/proposals/{proposal}/", "registry-proposal-withdraw",
                            None, {}, "proposal.withdrawn"),
    "decide from the inbox": ("bob", "/approvals/", "registry-proposal-approve",
                              "expected_generation", {}, "proposal.approved"),
    "create a guardrail": ("dana", "/guardrails/new", "registry-guardrail-new", "name",
                           {"name": "g2", "expression": "true", "message": "m"},
                           "guardrail.created"),
    "edit a guardrail": ("dana", "/guardrails/no-crm/edit", "registry-guardrail-edit",
                         "expression", {"message": "changed"}, "guardrail.updated"),
    "delete a guardrail": ("dana", "/guardrails/no-crm/delete", "registry-guardrail-delete",
                           None, {}, "guardrail.deleted"),
    "triage an escalation": ("bob", "/escalations/", "escalations-triage", "triage",
                             {"triage": "assign"}, "escalation.triaged"),
    "resolve an escalation": ("bob", "/escalations/", "escalations-resolve", "resolution",
                              {"resolution": "suspend", "comment": "stop it"},
                              "escalation.resolved"),
    "snooze from the inbox": ("bob", "/approvals/", "escalations-triage", "until",
                              {"triage": "snooze_until", "until": "{tomorrow}"},
                              "escalation.triaged"),
    "resolve from the inbox": ("bob", "/approvals/", "escalations-resolve", "resolution",
                               {"resolution": "suspend", "comment": "stop it"},
                               "escalation.resolved"),
    "bulk assign from the inbox queue": ("bob", "/inbox/", "inbox-triage-page", "bulk",
                                         {"bulk": "assign", "escalation": "{escalation}"},
                                         "escalation.triaged"),
    "decide an incident from the inbox queue": ("bob", "/inbox/", "incident-resolve-page",
                                                "resolution", {"resolution": "suspend",
                                                               "comment": "stop it"},
                                                "escalation.resolved"),
    "add where to be notified": ("bob", "/account/notifications/", "notification-preferences",
                                 "target", {"channel": "email", "target": "bob@example.com"},
                                 "notification.preference_set"),
    "acknowledge a finding": ("dana", "/findings/", "findings", "reason",
                              {"reason": "known"}, "finding.acknowledged"),
    "revoke a token": ("alice", "/tokens/", "registry-token-revoke", "reason",
                       {"reason": "rotated"}, "token.revoked"),
    "keep a token": ("alice", "/tokens/", "registry-token-keep", None, {}, "token.kept"),
    "issue an agent's token": ("alice", "/tokens/", "registry-token-issue", None,
                               {"agent": "refund-agent"}, "agent.token_issued"),
    "ask for a waiver": ("alice", "/agents/refund-agent/", "registry-agent-waiver-request",
                         "pointer", {"reason": "pilot", "ticket": "CHG-1", "duration": "1h"},
                         "waiver.requested"),
    "propose retiring an agent": ("alice", "/agents/refund-agent/", "registry-agent-retire",
                                  "reason", {"reason": "replaced"}, "retirement.proposed"),
    "propose a recertification": ("alice", "/agents/refund-agent/",
                                  "registry-agent-recertify", "review_after",
                                  {"comment": "still right"}, "recertification.proposed"),
    "set a review interval": ("dana", "/recertification/", "registry-review-interval",
                              "interval", {"interval": "30d"}, "review_interval.changed"),
    "enrol an authenticator": ("bob", "/account/two-factor/", "registry-two-factor", "start",
                               {}, "stepup.enrolment_started"),
    "inject drift in the lab": ("dana", "/lab/", "lab", "agent", {"what": "drift"},
                                "sandbox.changed"),
    "mass drift in the lab": ("dana", "/lab/", "lab", "count", {"what": "mass", "count": "1"},
                              "sandbox.changed"),
}


def form_for(client: Client, page: str, url_name: str, marker: str | None) -> Form:
    for form in forms_on(client, page):
        names = set(form.fields) | {name for name, _ in form.buttons}
        if route(form.action) == url_name and (marker is None or marker in names):
            return form
    raise AssertionError(f"no {url_name} form with {marker!r} on {page}")


@pytest.mark.parametrize("what", list(FORMS))
def test_a_form_without_its_token_is_refused_and_with_it_does_its_work(cluster, people, what):
    who, page, url_name, marker, filled, audited = FORMS[what]
    client = Client(enforce_csrf_checks=True)
    if who != "anonymous":
        client.force_login(getattr(people, who))
    page = page.format(**cluster)
    form = form_for(client, page, url_name, marker)
    tomorrow = (timezone.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    data = {**form.fields, **{key: value.replace("{tomorrow}", tomorrow).replace(
                                  "{escalation}", str(cluster["escalation"]))
                              if isinstance(value, str) else value
                              for key, value in filled.items()}}
    token = data.pop("csrfmiddlewaretoken")
    before = AuditEntry.objects.filter(action=audited).count()

    forged = client.post(form.action, data)
    assert forged.status_code == 403 and b"CSRF" in forged.content
    assert AuditEntry.objects.filter(action=audited).count() == before

    sent = client.post(form.action, {**data, "csrfmiddlewaretoken": token})
    assert sent.status_code in (200, 302), (what, sent.status_code)
    assert AuditEntry.objects.filter(action=audited).count() == before + 1, what


CRAWL = {
    "anonymous": ["/login/"],
    "alice": ["/", "/manifests/new", "/proposals/{proposal}/", "/agents/refund-agent/",
              "/tokens/"],
    "bob": ["/approvals/", "/inbox/", "/proposals/{proposal}/", "/escalations/",
            "/account/two-factor/", "/account/notifications/"],
    "dana": ["/findings/", "/lab/", "/guardrails/", "/guardrails/new",
             "/guardrails/no-crm/edit", "/guardrails/no-crm/delete", "/audit/",
             "/recertification/"],
}


def test_every_post_form_the_pages_render_is_in_the_table(cluster, people):
    """A new form on a page fails here until it is added to FORMS."""
    found = set()
    for who, page_list in CRAWL.items():
        client = Client(enforce_csrf_checks=True)
        if who != "anonymous":
            client.force_login(getattr(people, who))
        for page in page_list:
            for form in forms_on(client, page.format(**cluster)):
                assert "csrfmiddlewaretoken" in form.fields, (page, form.action)
                found.add(route(form.action))
    assert found == {url_name for _, _, url_name, _, _, _ in FORMS.values()}


def test_session_api_writes_need_the_csrf_token(cluster, people):
    client = Client(enforce_csrf_checks=True)
    client.force_login(people.dana)
    assert client.get("/api/v1/guardrails").status_code == 200  # safe methods need none
    body = {"name": "g3", "expression": "true", "effect": "warn", "message": "m"}
    forged = client.post("/api/v1/guardrails", body, content_type="application/json")
    assert forged.status_code == 403 and "CSRF" in forged.json()["error"]["message"]
    client.get("/")  # a page sets the CSRF cookie, as in a browser
    token = client.cookies["csrftoken"].value
    sent = client.post("/api/v1/guardrails", body, content_type="application/json",
                       HTTP_X_CSRFTOKEN=token)
    assert sent.status_code == 201

    client.force_login(people.bob)
    approve = f"/api/v1/proposals/{cluster['proposal']}/approve"
    assert client.post(approve, {}, content_type="application/json").status_code == 403
    client.get("/")
    token = client.cookies["csrftoken"].value
    assert client.post(approve, {}, content_type="application/json",
                       HTTP_X_CSRFTOKEN=token).status_code == 200


def test_token_authenticated_api_calls_need_no_csrf_token(cluster, people, api_as):
    for user, method, path, body, status in (
            (people.dana, "post", "/api/v1/guardrails",
             {"name": "g4", "expression": "true", "effect": "warn", "message": "m"}, 201),
            (people.bob, "post", f"/api/v1/proposals/{cluster['proposal']}/approve", {}, 200),
            (people.alice, "put", "/api/v1/agents/refund-agent/observed-state",
             {"running": True}, 202)):
        _, key = registry_actions.issue_api_token(user, actor=user)
        client = APIClient(enforce_csrf_checks=True)
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        response = getattr(client, method)(path, body, format="json")
        assert response.status_code == status, (path, response.content[:200])
