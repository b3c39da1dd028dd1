"""The OAuth permission source against the suite's local authorisation server: the scopes an
agent's token really holds are read by introspection (RFC 7662), a token holding more than
approved is revoked (RFC 7009) and verified; a server that is down, a client it refuses and a
token shared by agents are never acted on blindly."""

import json
import re
import socket

import pytest
from django.test import Client

from audit.models import AuditEntry
from config.permission_sources import parse_sources
from reconciliation.actions import reconcile_agent
from reconciliation.actions.observations import record_observation
from reconciliation.connectors import ConnectorError
from reconciliation.models import Correction, Escalation, Finding
from sources.models import SourceReading
from tests.conftest import approved_agent
from tests.oidc_provider import CLIENT_ID, CLIENT_SECRET, LocalProvider, issue

pytestmark = pytest.mark.django_db

CLIENT, TOKEN = "CONN35_IDP_CLIENT", "CONN35_REFUND_TOKEN"
CRM_READ = [{"resource": "orders_db", "access": "read"},
            {"resource": "payments", "access": "write"},
            {"resource": "crm", "access": "read"}]


@pytest.fixture
def idp():
    with LocalProvider(redirect_uris=[]) as provider:
        yield provider


def declare(settings, monkeypatch, provider, token: str, agents=None, client=None,
            scopes=None, issuer: str | None = None) -> None:
    """The admin declares the identity provider (at `issuer`, else where it runs) as the
    source of record for `mail`."""
    issuer = issuer or provider.issuer
    monkeypatch.setenv(CLIENT, client or f"{CLIENT_ID}:{CLIENT_SECRET}")
    monkeypatch.setenv(TOKEN, token)
    settings.CONNECTOR_SECRETS = [CLIENT, TOKEN]
    settings.CONNECTOR_ALLOWED_HOSTS = [issuer.removeprefix("http://")]
    settings.PERMISSION_SOURCES = parse_sources(json.dumps({"mail-idp": {
        "type": "oauth", "secret": CLIENT,
        "introspection_url": f"{issuer}/introspect",
        "revocation_url": f"{issuer}/revoke",
        "scopes": scopes or {"mail.read": {"resource": "mail", "access": "read"},
                             "mail.send": {"resource": "mail", "access": "write"}},
        "agents": agents or {"refund-agent": TOKEN}}}), [CLIENT, TOKEN])


def reporting(people, enforcement: str = "correct"):
    """The refund agent (no mail access approved), reporting no mail access either."""
    agent = approved_agent(people, "refund-agent", connector={"type": "push"}, data=CRM_READ,
                           enforcement={"default": enforcement})
    state = {k: v for k, v in agent.enforced_spec.items() if k != "enforcement"}
    record_observation(agent, {**state, "running": True}, actor="agent:refund-agent",
                       source="push", trigger_reconcile=False)
    return agent


def test_a_token_holding_an_unapproved_scope_is_revoked_and_verified(
        people, idp, settings, monkeypatch):
    token = issue(idp, "openid mail.send")
    declare(settings, monkeypatch, idp, token)
    agent = reporting(people)
    run = reconcile_agent(agent.pk, trigger="manual")

    finding = Finding.objects.get(agent=agent)
    assert (finding.kind, finding.pointer, finding.actual) == ("data_added", "/data/mail",
                                                               "write")
    assert finding.cause["witnesses"]["said"] == (
        "the agent reported no access; mail-idp (the source of record) says write")
    assert run.result == "corrected" and finding.status == "corrected"
    assert token in idp.revoked
    assert Correction.objects.get(finding=finding).result == "verified"
    corrected = AuditEntry.objects.get(action="source.corrected")
    assert corrected.after["statements"] == [
        f"revoke the token in {TOKEN} at {idp.issuer}/revoke (RFC 7009)"]
    known = AuditEntry.objects.filter(action="source.known").order_by("seq").first()
    assert {g["what"] for g in known.after["grants"]} == {
        "scope mail.send", "scope openid (maps to no resource)"}
    assert SourceReading.objects.get(agent=agent).access == {"mail": None}


def test_an_approved_token_is_left_alone(people, idp, settings, monkeypatch):
    token = issue(idp, "mail.read")
    declare(settings, monkeypatch, idp, token)
    agent = approved_agent(people, "refund-agent", connector={"type": "push"},
                           data=[*CRM_READ, {"resource": "mail", "access": "read"}],
                           enforcement={"default": "correct"})
    state = {k: v for k, v in agent.enforced_spec.items() if k != "enforcement"}
    record_observation(agent, {**state, "running": True}, actor="agent:refund-agent",
                       source="push", trigger_reconcile=False)
    assert reconcile_agent(agent.pk, trigger="manual").result == "converged"
    assert token not in idp.revoked


def test_a_server_that_is_down_keeps_the_last_state_and_revokes_nothing(
        people, settings, monkeypatch):
    with LocalProvider(redirect_uris=[]) as provider:
        token = issue(provider, "mail.send")
        declare(settings, monkeypatch, provider, token)
    agent = reporting(people)  # the server has stopped
    with pytest.raises(ConnectorError, match="permission source mail-idp unreachable"):
        reconcile_agent(agent.pk, trigger="manual")
    assert SourceReading.objects.get(agent=agent).status == "unknown"
    assert not Finding.objects.exists() and not Correction.objects.exists()
    assert token not in provider.revoked


def test_a_client_the_server_will_not_let_revoke_is_escalated(
        people, idp, settings, monkeypatch):
    token = issue(idp, "mail.send")
    idp.revoke_allowed = False
    declare(settings, monkeypatch, idp, token)
    agent = reporting(people)
    reconcile_agent(agent.pk, trigger="manual")
    assert token not in idp.revoked
    assert Finding.objects.get(agent=agent).status == "escalated"
    assert "the client may not revoke tokens" in Escalation.objects.get(agent=agent).reason


def test_credentials_the_server_refuses_to_read_with_are_escalated_once(
        people, idp, settings, monkeypatch):
    declare(settings, monkeypatch, idp, issue(idp, "mail.send"), client=f"{CLIENT_ID}:wrong")
    agent = reporting(people)
    for _ in range(2):
        with pytest.raises(ConnectorError, match="refused the control plane's client"):
            reconcile_agent(agent.pk, trigger="manual")
    (escalation,) = Escalation.objects.filter(agent=agent)
    assert escalation.finding is None
    assert "an admin gives the connector credentials that may read it" in escalation.reason


def test_a_token_shared_by_agents_is_not_revoked(people, idp, settings, monkeypatch):
    token = issue(idp, "mail.send")
    declare(settings, monkeypatch, idp, token,
            agents={"refund-agent": TOKEN, "billing-agent": TOKEN})
    agent = reporting(people)
    reconcile_agent(agent.pk, trigger="manual")
    assert token not in idp.revoked
    assert "shared by agents billing-agent, refund-agent" in Escalation.objects.get(
        agent=agent).reason


def test_a_server_that_goes_down_keeps_the_last_known_state_shown_as_unknown(
        people, idp, settings, monkeypatch, api_as):
    token = issue(idp, "openid")
    declare(settings, monkeypatch, idp, token)
    agent = reporting(people)
    assert reconcile_agent(agent.pk, trigger="manual").result == "converged"
    idp.scopes[token] = "openid mail.send"  # widened at the provider, then it is lost
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{probe.getsockname()[1]}"  # nothing listens there
    declare(settings, monkeypatch, idp, token, issuer=gone)

    with pytest.raises(ConnectorError, match="permission source mail-idp unreachable"):
        reconcile_agent(agent.pk, trigger="manual")
    reading = SourceReading.objects.get(agent=agent)
    assert (reading.status, reading.access) == ("unknown", {"mail": None})  # last known
    assert reading.read_at is not None
    assert token not in idp.revoked and not Finding.objects.exists()
    (shown,) = api_as(people.alice).get(
        "/api/v1/agents/refund-agent/permission-sources").json()["sources"]
    assert (shown["type"], shown["status"], shown["access"], shown["error"]) == (
        "oauth", "unknown", {"mail": None}, "permission source mail-idp unreachable")
    client = Client()
    client.force_login(people.alice)
    page = " ".join(re.sub(r"<[^>]+>", " ", client.get("/agents/refund-agent/")
                           .content.decode()).split())
    assert (f"mail-idp (oauth, role {TOKEN} ): ⚠ unknown now (permission source mail-idp "
            f"unreachable); last known state, read") in page
    assert "mail no access" in page

    declare(settings, monkeypatch, idp, token)  # back: found and revoked
    assert reconcile_agent(agent.pk, trigger="manual").result == "corrected"
    assert token in idp.revoked


def test_hostile_scopes_and_token_ids_are_read_and_revoked_exactly(
        people, idp, settings, monkeypatch):
    """Whatever the server puts in `scope` (quotes, unicode, SQL, tabs), and a token id
    holding every character a form or a header must encode: mapped scopes count exactly,
    the rest are listed as they are, and the very token is revoked."""
    token = 'tök"en \'; DROP--&=+/%20\u2028\\x'
    idp.scopes[token] = 'openid\tmail.send "mail.read" ménage;DROP\u00a0x Mail.Send'
    declare(settings, monkeypatch, idp, token, scopes={
        "mail.read": {"resource": "mail", "access": "read"},
        "mail.send": {"resource": "mail", "access": "write"},
        "ménage": {"resource": "house-keeping", "access": "read"}})
    agent = reporting(people)
    reconcile_agent(agent.pk, trigger="manual")

    known = AuditEntry.objects.filter(action="source.known").order_by("seq").first()
    assert known.after["access"] == {"house-keeping": None, "mail": "write"}
    assert {g["what"] for g in known.after["grants"]} == {
        "scope mail.send", 'scope "mail.read" (maps to no resource)',
        "scope openid (maps to no resource)", "scope Mail.Send (maps to no resource)",
        "scope ménage;DROP\u00a0x (maps to no resource)"}  # a scope is compared exactly
    assert token in idp.revoked  # this token, not a prefix or a decoded cousin
    assert Finding.objects.get(agent=agent, pointer="/data/mail").status == "corrected"


def test_a_token_is_revoked_only_where_enforcement_says_correct(
        people, idp, settings, monkeypatch):
    token = issue(idp, "mail.send")
    declare(settings, monkeypatch, idp, token)
    agent = reporting(people, enforcement="escalate")
    reconcile_agent(agent.pk, trigger="manual")
    assert token not in idp.revoked
    finding = Finding.objects.get(agent=agent)
    assert (finding.status, finding.actual) == ("escalated", "write")
    assert Escalation.objects.get(finding=finding).status == "open"
    assert not AuditEntry.objects.filter(action__startswith="source.correct").exists()
