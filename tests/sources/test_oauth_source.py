"""The OAuth permission source against the suite's local authorisation server: the scopes an
agent's token really holds are read by introspection (RFC 7662), a token holding more than
approved is revoked (RFC 7009) and verified; a server that is down, a client it refuses and a
token shared by agents are never acted on blindly."""

import json

import pytest

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


def declare(settings, monkeypatch, provider, token: str, agents=None, client=None) -> None:
    """The admin declares the identity provider as the source of record for `mail`."""
    monkeypatch.setenv(CLIENT, client or f"{CLIENT_ID}:{CLIENT_SECRET}")
    monkeypatch.setenv(TOKEN, token)
    settings.CONNECTOR_SECRETS = [CLIENT, TOKEN]
    settings.CONNECTOR_ALLOWED_HOSTS = [f"127.0.0.1:{provider.server.server_address[1]}"]
    settings.PERMISSION_SOURCES = parse_sources(json.dumps({"mail-idp": {
        "type": "oauth", "secret": CLIENT,
        "introspection_url": f"{provider.issuer}/introspect",
        "revocation_url": f"{provider.issuer}/revoke",
        "scopes": {"mail.read": {"resource": "mail", "access": "read"},
                   "mail.send": {"resource": "mail", "access": "write"}},
        "agents": agents or {"refund-agent": TOKEN}}}), [CLIENT, TOKEN])


def reporting(people):
    """The refund agent (no mail access approved), reporting no mail access either."""
    agent = approved_agent(people, "refund-agent", connector={"type": "push"}, data=CRM_READ,
                           enforcement={"default": "correct"})
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
