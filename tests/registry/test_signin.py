"""One sign-in limit on every way in, keyed on the account and the client address together."""

import ipaddress

import pytest
from django.contrib.auth.models import User

from audit.models import AuditEntry
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

ATTACKER = "203.0.113.7"


def guess(client, path: str, username: str, password: str = "wrong", **extra):
    return client.post(path, {"username": username, "password": password}, **extra)


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


@pytest.fixture
def staff_admin(people):
    User.objects.filter(pk=people.admin.pk).update(is_staff=True, is_superuser=True)
    return people.admin


def test_after_the_site_form_locks_an_account_the_admin_form_refuses_it_too(staff_admin,
                                                                            client):
    for _ in range(4):
        assert guess(client, "/login/", "admin", REMOTE_ADDR=ATTACKER).status_code == 200
    assert guess(client, "/login/", "admin", REMOTE_ADDR=ATTACKER).status_code == 429  # 5th
    locked = guess(client, "/login/", "admin", PASSWORD, REMOTE_ADDR=ATTACKER)
    assert locked.status_code == 429 and "Too many failed sign-ins" in locked.content.decode()
    # The right password through the admin's own form: refused, no session.
    admin_form = guess(client, "/admin/login/", "admin", PASSWORD, REMOTE_ADDR=ATTACKER)
    assert admin_form.status_code == 429 and not signed_in(client)
    assert client.get("/admin/", REMOTE_ADDR=ATTACKER).status_code == 302
    assert client.get("/api/v1/agents", REMOTE_ADDR=ATTACKER).status_code in (401, 403)


def test_failures_on_the_admin_form_count_against_the_site_form(staff_admin, client):
    for _ in range(4):
        assert guess(client, "/admin/login/", "admin", REMOTE_ADDR=ATTACKER).status_code == 200
    assert guess(client, "/admin/login/", "admin", REMOTE_ADDR=ATTACKER).status_code == 429
    assert guess(client, "/login/", "admin", PASSWORD, REMOTE_ADDR=ATTACKER).status_code == 429
    assert not signed_in(client)


def test_the_api_gets_the_limit_as_its_json_error(staff_admin, client):
    for _ in range(5):
        guess(client, "/login/", "admin", REMOTE_ADDR=ATTACKER)
    locked = guess(client, "/admin/login/", "admin", PASSWORD, REMOTE_ADDR=ATTACKER,
                   HTTP_ACCEPT="application/json")
    assert locked.status_code == 429
    assert locked.json()["error"]["code"] == "rate_limited"


def test_guesses_under_random_usernames_do_not_lock_out_carol_behind_the_same_address(
        people, client):
    for attempt in range(30):
        assert guess(client, "/login/", f"guess-{attempt}", REMOTE_ADDR=ATTACKER).status_code \
            == 200
    assert guess(client, "/login/", "carol", PASSWORD, REMOTE_ADDR=ATTACKER).status_code == 302


def test_guesses_at_carol_from_elsewhere_do_not_lock_her_out(people, client):
    for _ in range(10):
        guess(client, "/login/", "carol", REMOTE_ADDR=ATTACKER)
    assert guess(client, "/login/", "carol", PASSWORD, REMOTE_ADDR=ATTACKER).status_code == 429
    assert guess(client, "/login/", "carol", PASSWORD, REMOTE_ADDR="198.51.100.4").status_code \
        == 302


def test_a_locked_out_attempt_with_the_right_password_is_audited_as_a_failure(people, client):
    for _ in range(5):
        guess(client, "/login/", "dana", REMOTE_ADDR=ATTACKER)
    guess(client, "/login/", "dana", PASSWORD, REMOTE_ADDR=ATTACKER)
    failures = AuditEntry.objects.filter(action="user.sign_in_failed", target="user:dana")
    assert failures.count() == 6
    assert failures.order_by("-seq").first().after["ip"] == ATTACKER
    assert not AuditEntry.objects.filter(action="user.signed_in").exists()


def test_behind_a_trusted_proxy_each_client_is_limited_on_its_own_address(people, client,
                                                                        settings):
    settings.TRUSTED_PROXIES = [ipaddress.ip_network("10.0.0.0/24")]
    proxy = {"REMOTE_ADDR": "10.0.0.2"}
    for attempt in range(5):
        # The attacker writes a different address each time at the left; only the hop the
        # proxy appended counts.
        guess(client, "/login/", "carol", HTTP_X_FORWARDED_FOR=f"192.0.2.{attempt}, {ATTACKER}",
              **proxy)
    locked = guess(client, "/login/", "carol", PASSWORD,
                   HTTP_X_FORWARDED_FOR=f"192.0.2.99, {ATTACKER}", **proxy)
    assert locked.status_code == 429
    # carol, behind the same proxy from her own address, signs in.
    assert guess(client, "/login/", "carol", PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.4",
                 **proxy).status_code == 302
    entry = AuditEntry.objects.filter(action="user.signed_in").order_by("-seq").first()
    assert entry.after["ip"] == "198.51.100.4"


def test_an_untrusted_client_cannot_pick_its_address_with_x_forwarded_for(people, client):
    for attempt in range(5):
        guess(client, "/login/", "carol", HTTP_X_FORWARDED_FOR=f"192.0.2.{attempt}",
              REMOTE_ADDR=ATTACKER)
    assert guess(client, "/login/", "carol", PASSWORD, HTTP_X_FORWARDED_FOR="192.0.2.200",
                 REMOTE_ADDR=ATTACKER).status_code == 429


def test_with_redis_down_the_limit_still_holds(people, client, settings):
    from config import embedded_redis

    settings.REDIS_URL = f"redis://127.0.0.1:{embedded_redis.free_port()}/0"  # nothing there
    for _ in range(4):
        assert guess(client, "/login/", "dana", REMOTE_ADDR=ATTACKER).status_code == 200
    assert guess(client, "/login/", "dana", PASSWORD, REMOTE_ADDR=ATTACKER).status_code == 302
    client.post("/logout/")
    assert guess(client, "/login/", "dana", REMOTE_ADDR=ATTACKER).status_code == 429
    assert guess(client, "/login/", "dana", PASSWORD, REMOTE_ADDR=ATTACKER).status_code == 429


def test_a_sign_in_path_added_later_gets_the_same_limit_or_fails_closed(people, client):
    from axes.exceptions import AxesBackendRequestParameterRequired
    from django.contrib.auth import authenticate
    from django.test import RequestFactory

    for _ in range(5):
        guess(client, "/login/", "carol", REMOTE_ADDR=ATTACKER)
    request = RequestFactory().post("/some/new/login", REMOTE_ADDR=ATTACKER)
    assert authenticate(request, username="carol", password=PASSWORD) is None
    with pytest.raises(AxesBackendRequestParameterRequired):
        authenticate(username="carol", password=PASSWORD)  # forgot the request: refused
