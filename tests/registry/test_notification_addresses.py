"""People who leave, leave; addresses are proved before they are used (issue 29 item 10).

A deactivated approver kept receiving the approval queue by email; notification addresses were
neither verified nor capped (one owner made 30 preferences to arbitrary addresses). Now a
deactivated person hears nothing more (new or already queued), a new address gets only a token
until it is confirmed (by the link or the API), and a person has at most NOTIFY_MAX_ADDRESSES
(5 by default)."""

import re

import pytest
from django.core import mail
from django.core.management import call_command
from django.utils import timezone

from audit.models import AuditEntry
from reconciliation.actions import inbox_notices
from registry.actions import notifications
from registry.models import NotificationPreference
from tests.conftest import confirmed_preference
from tests.registry.test_notifications import (  # noqa: F401 - fixtures used by name
    escalated,
    mail_and_hooks,
    smtp,
    webhook,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def locmem(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.SITE_URL = "https://governance.example"
    mail.outbox.clear()
    return mail.outbox


def token_in(message) -> str:
    return re.search(r"token=([A-Za-z0-9_-]+)", message.body).group(1)


def inbox_mail(outbox, to: str) -> list:
    return [m for m in outbox if to in m.to and "confirm" not in m.subject]


def test_a_deactivated_approver_hears_nothing_more(people, locmem):
    confirmed_preference(actor=people.bob, channel="email", target="bob@example.com")
    escalated(people, "payouts-agent")
    assert inbox_notices.sweep()["sent"] == 1
    assert len(inbox_mail(locmem, "bob@example.com")) == 1
    # queued while active, then deactivated before the sweep sends it
    escalated(people, "billing-agent")
    inbox_notices.notice_new_items(timezone.now())
    call_command("set_active", "bob", "no", "--reason", "left the company")
    escalated(people, "refunds-agent")
    inbox_notices.sweep()
    assert len(inbox_mail(locmem, "bob@example.com")) == 1  # nothing after he left
    assert AuditEntry.objects.filter(action="notification.sent").count() == 1


def test_a_new_address_gets_only_its_token_until_confirmed(people, api_as, locmem,
                                                           django_capture_on_commit_callbacks):
    bob = api_as(people.bob)
    with django_capture_on_commit_callbacks(execute=True):
        made = bob.post("/api/v1/notifications/preferences",
                        {"channel": "email", "target": "someone@example.org"}, format="json")
    assert made.status_code == 201 and made.json()["verified"] is False
    assert "token" not in str(made.json())  # the token goes to the address, not to the caller
    (confirmation,) = locmem
    assert confirmation.to == ["someone@example.org"] and "confirm" in confirmation.subject
    escalated(people, "payouts-agent")
    inbox_notices.sweep()
    assert inbox_mail(locmem, "someone@example.org") == []
    pk = made.json()["id"]
    wrong = bob.post(f"/api/v1/notifications/preferences/{pk}/verify", {"token": "guess"},
                     format="json")
    assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "wrong_token"
    # another person with the right token cannot confirm bob's address
    other = api_as(people.carol).post(f"/api/v1/notifications/preferences/{pk}/verify",
                                      {"token": token_in(confirmation)}, format="json")
    assert other.status_code == 404
    ok = bob.post(f"/api/v1/notifications/preferences/{pk}/verify",
                  {"token": token_in(confirmation)}, format="json")
    assert ok.status_code == 200 and ok.json()["verified"] is True
    assert AuditEntry.objects.filter(action="notification.preference_verified").exists()
    inbox_notices.sweep()
    assert len(inbox_mail(locmem, "someone@example.org")) == 1
    again = bob.post(f"/api/v1/notifications/preferences/{pk}/verify",
                     {"token": token_in(confirmation)}, format="json")
    assert again.status_code == 409


def test_the_link_in_the_message_confirms_on_the_page(people, client, locmem,
                                                      django_capture_on_commit_callbacks):
    client.force_login(people.bob)
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/account/notifications/", {"channel": "email", "mode": "immediate",
                                                "target": "bob@example.com"})
    (confirmation,) = locmem
    link = re.search(r"https://governance.example(/account/notifications/\d+/verify\?token=\S+)",
                     confirmation.body).group(1)
    preference = NotificationPreference.objects.get()
    page = client.get(link).content.decode()
    assert "bob@example.com" in page and 'name="token"' in page
    preference.refresh_from_db()
    assert preference.verified_at is None  # a GET changes nothing
    listed = client.get("/account/notifications/").content.decode()
    assert "not confirmed" in listed
    client.post(link.split("?")[0], {"token": token_in(confirmation)})
    preference.refresh_from_db()
    assert preference.verified_at is not None


def test_addresses_are_capped_and_never_doubled(people, api_as, settings):
    bob = api_as(people.bob)
    made = [bob.post("/api/v1/notifications/preferences",
                     {"channel": "email", "target": f"x{i}@example.org"}, format="json")
            for i in range(30)]
    codes = [m.status_code for m in made]
    assert codes[:settings.NOTIFY_MAX_ADDRESSES] == [201] * settings.NOTIFY_MAX_ADDRESSES
    assert set(codes[settings.NOTIFY_MAX_ADDRESSES:]) == {422}
    assert made[-1].json()["error"]["code"] == "too_many_addresses"
    assert NotificationPreference.objects.filter(user=people.bob).count() == 5
    bob.delete(f"/api/v1/notifications/preferences/{made[0].json()['id']}")
    twice = bob.post("/api/v1/notifications/preferences",
                     {"channel": "email", "target": "x1@example.org"}, format="json")
    assert twice.status_code == 409
    # a team's addresses are capped as well (an admin sets them)
    admin = api_as(people.admin)
    team = [admin.post("/api/v1/notifications/preferences",
                       {"channel": "email", "target": f"t{i}@example.org", "team": "payments"},
                       format="json").status_code for i in range(7)]
    assert team == [201] * 5 + [422] * 2


def test_a_webhook_gets_only_the_confirmation_until_confirmed(
        people, request, django_capture_on_commit_callbacks):
    _, hooks = request.getfixturevalue("mail_and_hooks")  # a local receiver
    with django_capture_on_commit_callbacks(execute=True):
        preference = notifications.set_preference(actor=people.carol, channel="webhook",
                                                  target=hooks.url)
    escalated(people, "payouts-agent")
    inbox_notices.sweep()
    assert len(hooks.received) == 1 and "confirm" in hooks.received[0]["text"]
    notifications.verify_preference(preference.pk, actor=people.carol,
                                    token=preference.verification_token)
    inbox_notices.sweep()
    assert len(hooks.received) == 2 and "payouts-agent" in hooks.received[1]["text"]
