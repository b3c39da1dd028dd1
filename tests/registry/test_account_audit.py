"""Every change to who can do what is in the trail: passwords by any path, superusers made on
the command line, and the admin flags that go with the admin role."""

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from audit.models import AuditEntry
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a-much-longer-passphrase-7"


def rows(action: str, target: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action, target=target).order_by("seq"))


def test_changing_your_password_in_the_admin_is_audited_without_the_password(people, client):
    User.objects.filter(pk=people.admin.pk).update(is_staff=True, is_superuser=True)
    client.force_login(people.admin)
    answer = client.post("/admin/password_change/", {
        "old_password": PASSWORD, "new_password1": NEW_PASSWORD,
        "new_password2": NEW_PASSWORD})
    assert answer.status_code == 302
    (row,) = rows("user.password_changed", "user:admin")
    assert row.actor == "admin" and row.request_id
    assert NEW_PASSWORD not in str(row.after) and "pbkdf2" not in str(row.after)


def test_the_changepassword_command_is_audited_with_who_ran_it(people, monkeypatch):
    import getpass

    monkeypatch.setattr(getpass, "getpass", lambda prompt="": NEW_PASSWORD)
    call_command("changepassword", "alice")
    (row,) = rows("user.password_changed", "user:alice")
    assert row.actor.startswith("system:cli (OS user ")
    assert User.objects.get(username="alice").check_password(NEW_PASSWORD)


def test_a_password_set_from_a_shell_is_audited(people):
    people.bob.set_password(NEW_PASSWORD)
    people.bob.save()
    assert rows("user.password_changed", "user:bob")


def test_createsuperuser_is_audited_as_an_admin_account(db, monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", NEW_PASSWORD)
    call_command("createsuperuser", "--noinput", "--username", "mallory",
                 "--email", "mallory@example.com")
    (created,) = rows("user.created", "user:mallory")
    assert created.actor.startswith("system:cli (OS user ")
    assert created.after["is_superuser"] is True and created.after["is_staff"] is True
    assert created.after["password"] == "set"


def test_revoking_the_admin_role_takes_the_superuser_flag_too_and_both_are_audited(
        db, client, capsys):
    call_command("grant_role", "oscar", "admin", "--create")
    password = capsys.readouterr().out.split("with password ")[1].split()[0]
    oscar = User.objects.get(username="oscar")
    assert oscar.is_superuser and oscar.is_staff
    (granted,) = rows("user.flags_changed", "user:oscar")
    assert granted.after["is_superuser"] is True

    call_command("grant_role", "oscar", "admin", "--revoke")
    assert "oscar: admin revoked" in capsys.readouterr().out
    oscar.refresh_from_db()
    assert not oscar.is_superuser and not oscar.is_staff
    assert rows("user.flags_changed", "user:oscar")[-1].after["is_superuser"] is False
    # Signed in, oscar is no admin any more.
    assert client.post("/login/", {"username": "oscar", "password": password}).status_code \
        == 302
    assert client.get("/lab/").status_code == 403
    assert client.get("/admin/").status_code == 302


def test_deactivating_a_person_stops_their_session_and_tokens_at_once_and_is_audited(
        people, client, api_as, capsys):
    alice_api = api_as(people.alice)
    client.force_login(people.alice)
    assert client.get("/agents/").status_code == 200
    call_command("set_active", "alice", "no", "--reason", "left the company")
    assert "alice: inactive" in capsys.readouterr().out
    assert client.get("/agents/").status_code == 302  # back to the sign-in page
    assert alice_api.get("/api/v1/agents").status_code == 401
    (row,) = rows("user.flags_changed", "user:alice")
    assert row.before["is_active"] is True and row.after["is_active"] is False
    assert row.reason == "left the company" and row.actor.startswith("system:cli")
