"""Roles, accounts and API tokens: the commands operators use, and what each leaves in the trail."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditEntry
from registry import actions
from registry.models import ApiToken, hash_token_key
from registry.roles import has_role, user_roles
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def last_entry() -> AuditEntry:
    return AuditEntry.objects.order_by("-seq").first()


def test_grant_role_creates_the_account_and_audits_both(capsys):
    call_command("grant_role", "erin", "approver", "--create")
    out = capsys.readouterr().out
    assert "created erin with password" in out and "erin: approver granted" in out
    password = out.split("with password ")[1].split()[0]
    erin = User.objects.get(username="erin")
    assert erin.check_password(password)
    assert user_roles(erin) == {"approver"}
    erin_entries = AuditEntry.objects.filter(target="user:erin")
    actions_logged = list(erin_entries.values_list("action", "actor"))
    assert actions_logged == [("user.created", "system:cli"), ("role.granted", "system:cli")]
    assert last_entry().after == {"roles": ["approver"]}


def test_grant_role_refuses_unknown_people_and_roles_without_changing_anything():
    with pytest.raises(CommandError, match="pass --create"):
        call_command("grant_role", "nobody", "owner")
    with pytest.raises(CommandError):
        call_command("grant_role", "nobody", "emperor", "--create")
    assert not User.objects.filter(username="nobody").exists()
    assert AuditEntry.objects.count() == 0


def test_granting_a_held_role_again_changes_nothing(people):
    before = AuditEntry.objects.count()
    assert actions.grant_role(people.bob, "approver", actor="system:test") is False
    assert AuditEntry.objects.count() == before


def test_revoking_a_role_takes_its_permissions_away(people):
    assert actions.revoke_role(people.dana, "compliance", actor=people.admin)
    dana = User.objects.get(pk=people.dana.pk)
    assert not has_role(dana, "compliance")
    assert last_entry().action == "role.revoked" and last_entry().actor == "admin"


def test_admin_role_holds_every_role(people):
    assert has_role(people.admin, "compliance") and has_role(people.admin, "approver")
    assert not has_role(people.alice, "compliance")


def test_api_token_command_prints_a_working_token_stored_only_hashed(people, capsys):
    call_command("api_token", "dana")
    key = capsys.readouterr().out.strip()
    token = ApiToken.objects.get(key_hash=hash_token_key(key))
    assert key not in {token.key_hash, token.key_prefix, token.name}
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/audit/verify").status_code == 200
    assert last_entry().action in {"token.issued"} or AuditEntry.objects.filter(
        action="token.issued", target="user:dana").exists()


def test_api_token_command_refuses_unknown_people():
    with pytest.raises(CommandError, match="no active user"):
        call_command("api_token", "ghost")


@pytest.mark.parametrize("header", [
    "Token not-a-real-token", "Token", "Token a b", "Token \u00e9\u00e9",
])
def test_wrong_tokens_get_401_with_the_json_error(db, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/audit/verify")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert response["WWW-Authenticate"] == "Token"


def test_revoked_and_expired_tokens_stop_working(people):
    token, key = actions.issue_api_token(people.dana, actor=people.dana)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/audit/verify").status_code == 200
    actions.revoke_api_token(token, actor=people.admin, reason="laptop lost")
    assert client.get("/api/v1/audit/verify").status_code == 401
    assert last_entry().action == "token.revoked" and last_entry().reason == "laptop lost"

    expiring, key2 = actions.issue_api_token(people.dana, actor=people.dana, expires_in_days=1)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key2}")
    assert client.get("/api/v1/audit/verify").status_code == 200
    ApiToken.objects.filter(pk=expiring.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert client.get("/api/v1/audit/verify").status_code == 401


def test_sign_in_sign_in_failure_and_sign_out_are_audited(people, client):
    assert client.post("/login/", {"username": "dana", "password": "wrong"}).status_code == 200
    failed = last_entry()
    assert (failed.action, failed.target, failed.actor) == (
        "user.sign_in_failed", "user:dana", "anonymous")
    response = client.post("/login/", {"username": "dana", "password": PASSWORD})
    assert response.status_code == 302
    assert (last_entry().action, last_entry().actor) == ("user.signed_in", "dana")
    assert last_entry().request_id  # the request's id travels into the row
    client.post("/logout/")
    assert (last_entry().action, last_entry().actor) == ("user.signed_out", "dana")


def test_pages_need_a_sign_in(db, client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_deploy_checks_are_clean_with_debug_off(tmp_path):
    import base64
    import secrets
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {"PATH": "/usr/bin:/bin", "DEBUG": "false", "SECRET_KEY": secrets.token_urlsafe(60),
           "AUDIT_SIGNING_KEY": secrets.token_urlsafe(32), "REDIS_URL": "redis://127.0.0.1:1/0",
           "AUDIT_PRIVATE_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
           "ALLOWED_HOSTS": "gov.example.com", "VAR_DIR": str(tmp_path),
           "AUDIT_WITNESSES": f"file://{tmp_path / 'witness'}"}
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level",
                             "WARNING"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
    # The same installation without a witness is told that nobody outside it remembers heads.
    env["AUDIT_WITNESSES"] = "none"
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level",
                             "WARNING"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 1 and "config.W001" in result.stdout + result.stderr


def test_the_admin_shows_people_and_roles_but_never_changes_them_unaudited(people, client):
    from django.contrib.auth.models import Group

    User.objects.filter(pk=people.admin.pk).update(is_staff=True, is_superuser=True)  # as seeded
    client.force_login(people.admin)
    alice = f"/admin/auth/user/{people.alice.pk}/change/"
    assert client.get(alice).status_code == 200  # read-only view
    approvers = Group.objects.get(name="approver")
    answer = client.post(alice, {"username": "alice", "groups": [approvers.pk],
                                 "is_superuser": "on", "is_active": "on"})
    assert answer.status_code == 403
    assert client.post("/admin/auth/user/add/", {"username": "mallory"}).status_code == 403
    assert client.post(f"/admin/auth/group/{approvers.pk}/delete/",
                       {"post": "yes"}).status_code == 403
    people.alice.refresh_from_db()
    assert user_roles(people.alice) == {"owner"} and not people.alice.is_superuser
    assert not User.objects.filter(username="mallory").exists()
    assert Group.objects.filter(pk=approvers.pk).exists()
