"""Tokens are revoked by their holder, their agent's owner or an admin, from the command line,
the API and the web, and refused at once; a hand-over leaves the old owner no working token."""

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from audit.models import AuditEntry
from registry.choices import Role
from registry.models import ApiToken
from tests.conftest import REFUND_AGENT_YAML, make_person

pytestmark = pytest.mark.django_db


def cli_token(capsys, *args: str) -> tuple[str, APIClient]:
    """`manage.py api_token ...` as an operator runs it: the printed key, in an API client."""
    call_command("api_token", *args)
    key = capsys.readouterr().out.strip()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return key, client


def test_a_holder_revokes_their_own_token_through_the_api_and_it_answers_401_at_once(
        people, capsys):
    key, alice = cli_token(capsys, "alice")
    listed = alice.get("/api/v1/tokens").json()["results"]
    (mine,) = [t for t in listed if t["prefix"] == key[:8]]
    assert mine["holder"] == "alice" and mine["status"] == "active" and "key" not in mine
    answer = alice.post(f"/api/v1/tokens/{mine['id']}/revoke", {"reason": "laptop lost"},
                        format="json")
    assert answer.status_code == 200 and answer.json()["status"] == "revoked"
    assert alice.get("/api/v1/agents").status_code == 401
    row = AuditEntry.objects.filter(action="token.revoked").get()
    assert (row.actor, row.reason, row.before["token"]) == ("alice", "laptop lost", key[:8])


def test_the_owner_revokes_a_token_someone_else_issued_for_their_agent_on_the_web(
        people, refund_agent, client, capsys):
    key, agent = cli_token(capsys, "admin", "--agent", "refund-agent")
    assert agent.get("/api/v1/agents/refund-agent/desired-state").status_code == 200
    client.force_login(people.alice)
    page = client.get("/tokens/").content.decode()
    assert f"{key[:8]}…" in page and "agent refund-agent" in page
    token = ApiToken.objects.get(key_prefix=key[:8])
    client.post(f"/tokens/{token.pk}/revoke", {"reason": "not mine"})
    assert agent.get("/api/v1/agents/refund-agent/desired-state").status_code == 401
    assert "revoked" in client.get("/tokens/").content.decode()


def test_nobody_else_sees_or_revokes_a_token(people, refund_agent, api_as, client, capsys):
    key, alice = cli_token(capsys, "alice")
    token = ApiToken.objects.get(key_prefix=key[:8])
    bob = api_as(people.bob)
    assert key[:8] not in str(bob.get("/api/v1/tokens").json())
    assert bob.post(f"/api/v1/tokens/{token.pk}/revoke", {}, format="json").status_code == 404
    _, agent = cli_token(capsys, "alice", "--agent", "refund-agent")
    assert agent.post(f"/api/v1/tokens/{token.pk}/revoke", {},
                      format="json").status_code == 403
    client.force_login(people.dana)
    assert key[:8] not in client.get("/tokens/").content.decode()
    assert client.post(f"/tokens/{token.pk}/revoke", {}).status_code == 404
    assert alice.get("/api/v1/agents").status_code == 200  # still works
    # An admin may.
    assert api_as(people.admin).post(f"/api/v1/tokens/{token.pk}/revoke", {},
                                     format="json").status_code == 200
    assert alice.get("/api/v1/agents").status_code == 401


def test_the_command_line_lists_and_revokes_a_token(people, refund_agent, capsys):
    key, agent = cli_token(capsys, "alice", "--agent", "refund-agent")
    call_command("revoke_token", "--list", "--user", "alice")
    assert f"{key[:8]}  active" in capsys.readouterr().out
    call_command("revoke_token", key[:8], "--reason", "rotated")
    assert "revoked" in capsys.readouterr().out
    assert agent.get("/api/v1/agents/refund-agent/desired-state").status_code == 401
    with pytest.raises(CommandError, match="no token"):
        call_command("revoke_token", "nosuchxx")
    row = AuditEntry.objects.filter(action="token.revoked").get()
    assert (row.actor, row.agent, row.reason) == ("system:cli", "refund-agent", "rotated")


def test_a_hand_over_suspends_the_old_owners_tokens_until_the_new_owner_keeps_them(
        people, refund_agent, api_as, capsys):
    make_person("oscar", Role.OWNER)
    key, agent = cli_token(capsys, "alice", "--agent", "refund-agent")
    handover = REFUND_AGENT_YAML.replace("owner: alice", "owner: oscar")
    proposed = api_as(people.alice).generic("POST", "/api/v1/manifests", handover,
                                            content_type="application/yaml")
    assert proposed.status_code == 201, proposed.content
    proposal = proposed.json()["results"][0]["proposal"]
    assert api_as(people.bob).post(f"/api/v1/proposals/{proposal}/approve", {},
                                   format="json").status_code == 200

    assert agent.get("/api/v1/agents/refund-agent/desired-state").status_code == 401
    token = ApiToken.objects.get(key_prefix=key[:8])
    assert token.status == "suspended"
    assert AuditEntry.objects.filter(action="agent.handed_over").exists()
    assert AuditEntry.objects.filter(action="token.suspended", agent="refund-agent").exists()
    # The old owner cannot bring it back; the new owner can, and then holds it.
    alice = api_as(people.alice)
    assert alice.post(f"/api/v1/tokens/{token.pk}/keep", {},
                      format="json").status_code in (403, 404)
    oscar = api_as(people.alice.__class__.objects.get(username="oscar"))
    kept = oscar.post(f"/api/v1/tokens/{token.pk}/keep", {}, format="json")
    assert kept.status_code == 200 and kept.json()["holder"] == "oscar"
    assert agent.get("/api/v1/agents/refund-agent/desired-state").status_code == 200
    assert key[:8] not in str(alice.get("/api/v1/tokens").json())


def test_a_key_never_starts_with_a_dash_so_a_command_line_takes_it(people, monkeypatch):
    """`agentctl --token KEY` (and the README's auditor commands) read a key starting with '-'
    as another option and refused it; one in 64 random keys did."""
    import secrets

    from agentgov.cli import main as agentctl

    from registry.actions import issue_api_token

    drawn = iter(["-starts-with-a-dash" + "x" * 24, "plain-key" + "y" * 34])
    monkeypatch.setattr(secrets, "token_urlsafe", lambda n: next(drawn))
    token, key = issue_api_token(people.alice, actor="system:test")
    assert key == "plain-key" + "y" * 34 and token.key_prefix == key[:8]
    # What a leading dash did to the command line: argparse took it for an option.
    with pytest.raises(SystemExit):
        agentctl(["--url", "http://127.0.0.1:1", "--token", "-starts-with-a-dash", "get", "agents"])
