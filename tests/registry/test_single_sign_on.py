"""Single sign-on through a local OpenID Connect provider: roles follow the provider's groups at
every sign-in (audited), accounts are matched on the subject only, and every bad answer from the
provider (or from someone posing as it) is refused, counted by the sign-in limit and audited."""

from urllib.parse import urlparse

import pytest
import requests
from django.contrib.auth.models import User

from audit.choices import AuditAction
from audit.models import AuditEntry
from config.env import SettingError, env_role_map
from registry import sso_provider
from registry.models import SingleSignOnIdentity
from registry.roles import user_roles
from tests.conftest import PASSWORD
from tests.oidc_provider import LocalProvider, Person

pytestmark = pytest.mark.django_db

CALLBACK = "http://testserver/sso/callback/"
ROLE_MAP = {"agentgov-approvers": "approver", "agentgov-compliance": "compliance"}
ATTACKER = "203.0.113.7"


@pytest.fixture
def provider(settings):
    with LocalProvider(redirect_uris=[CALLBACK]) as running:
        for name, value in running.settings().items():
            setattr(settings, name, value)
        settings.OIDC_ROLE_MAP = ROLE_MAP
        sso_provider.forget_discovery()
        yield running
    sso_provider.forget_discovery()


def bob_at_the_provider(*groups: str) -> Person:
    return Person(sub="idp-0001", preferred_username="bob.sso", email="bob@corp.example",
                  groups=list(groups))


def through_provider(client, start: str = "/sso/start/", **extra):
    """The browser's trip: our start page, the provider's authorize page, our callback."""
    to_provider = client.get(start, **extra)
    assert to_provider.status_code == 302, to_provider.content
    back = requests.get(to_provider["Location"], allow_redirects=False, timeout=10)
    assert back.status_code == 302, back.text
    callback = urlparse(back.headers["Location"])
    return client.get(f"{callback.path}?{callback.query}", **extra)


def signed_in_user(client) -> User | None:
    pk = client.session.get("_auth_user_id")
    return User.objects.get(pk=pk) if pk else None


def failures(reason_part: str = "") -> list[AuditEntry]:
    return [entry for entry in AuditEntry.objects.filter(action=AuditAction.USER_SIGN_IN_FAILED,
                                                         target="user:sso:oidc")
            if reason_part in entry.reason]


def test_a_member_of_the_approvers_group_signs_in_as_an_approver(provider, client):
    provider.person = bob_at_the_provider("agentgov-approvers", "everyone")
    landed = through_provider(client)
    assert landed.status_code == 302 and landed["Location"] == "/"
    bob = signed_in_user(client)
    assert bob is not None and bob.username == "bob.sso" and not bob.has_usable_password()
    assert user_roles(bob) == {"approver"}
    assert SingleSignOnIdentity.objects.get(user=bob).subject == "idp-0001"
    granted = AuditEntry.objects.get(action=AuditAction.ROLE_GRANTED, target="user:bob.sso")
    assert granted.actor == f"sso:{provider.issuer}" and granted.after == {"roles": ["approver"]}
    assert AuditEntry.objects.filter(action=AuditAction.USER_SIGNED_IN,
                                     target="user:bob.sso").count() == 1
    assert client.get("/inbox/").status_code == 200


def test_removed_from_the_group_the_person_loses_the_role_at_the_next_sign_in(provider, client):
    provider.person = bob_at_the_provider("agentgov-approvers")
    through_provider(client)
    client.post("/logout/")
    provider.person = bob_at_the_provider("agentgov-compliance")
    through_provider(client)
    bob = signed_in_user(client)
    assert user_roles(bob) == {"compliance"}
    revoked = AuditEntry.objects.get(action=AuditAction.ROLE_REVOKED, target="user:bob.sso")
    assert revoked.before == {"roles": ["approver"]} and revoked.after == {"roles": []}
    assert client.get("/inbox/").status_code == 403
    client.post("/logout/")
    provider.person = bob_at_the_provider()  # in no mapped group at all
    through_provider(client)
    assert signed_in_user(client) == bob and user_roles(signed_in_user(client)) == frozenset()
    assert client.get("/inbox/").status_code == 403
    assert User.objects.filter(username__startswith="bob").count() == 1


def test_a_person_in_no_mapped_group_gets_no_role(provider, client):
    provider.person = bob_at_the_provider("agentgov-admins-typo", "everyone")
    through_provider(client)
    bob = signed_in_user(client)
    assert bob is not None and user_roles(bob) == frozenset()
    assert not AuditEntry.objects.filter(action=AuditAction.ROLE_GRANTED).exists()


def test_an_sso_alice_cannot_take_over_the_local_alice(provider, people, client):
    User.objects.filter(pk=people.alice.pk).update(email="alice@corp.example")
    provider.person = Person(sub="idp-evil", preferred_username="alice",
                             email="alice@corp.example", groups=["agentgov-approvers"])
    through_provider(client)
    impostor = signed_in_user(client)
    assert impostor is not None and impostor.pk != people.alice.pk
    assert impostor.username.startswith("alice.sso-")
    assert user_roles(people.alice) == {"owner"}  # neither given approver nor stripped of owner
    assert not AuditEntry.objects.filter(target="user:alice",
                                         action=AuditAction.USER_SIGNED_IN).exists()
    # The local alice still signs in with her password, as herself.
    client.post("/logout/")
    client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert signed_in_user(client) == people.alice


def test_the_same_subject_is_the_same_account_whatever_name_it_gives(provider, client):
    provider.person = bob_at_the_provider("agentgov-approvers")
    through_provider(client)
    first = signed_in_user(client)
    client.post("/logout/")
    provider.person = Person(sub="idp-0001", preferred_username="robert",
                             email="robert@corp.example", groups=["agentgov-approvers"])
    through_provider(client)
    assert signed_in_user(client) == first
    # And another subject claiming bob's name and email is someone else.
    client.post("/logout/")
    provider.person = Person(sub="idp-0002", preferred_username="bob.sso",
                             email="bob@corp.example", groups=[])
    through_provider(client)
    other = signed_in_user(client)
    assert other != first and user_roles(other) == frozenset()


@pytest.mark.parametrize(("misbehave", "reason"), [
    (lambda p: setattr(p, "sign_with_other_key", True), "Signature verification failed"),
    (lambda p: setattr(p, "lifetime_seconds", -120), "expired"),
    (lambda p: setattr(p, "audience", "someone-elses-client"), "Audience"),
    (lambda p: setattr(p, "nonce", "a-nonce-from-another-sign-in"), "Nonce"),
    (lambda p: setattr(p, "algorithm", "none"), "Could not find a valid JWKS"),
    (lambda p: setattr(p, "algorithm", "HS256"), "Could not find a valid JWKS"),
], ids=["wrong-key", "expired", "wrong-audience", "wrong-nonce", "alg-none", "alg-hs256"])
def test_a_bad_id_token_is_refused_and_audited(provider, client, misbehave, reason):
    provider.person = bob_at_the_provider("agentgov-approvers")
    misbehave(provider)
    landed = through_provider(client)
    assert landed.status_code == 302 and landed["Location"] == "/login/?sso=failed"
    assert signed_in_user(client) is None
    assert not User.objects.filter(username="bob.sso").exists()
    assert len(failures(reason)) == 1, [e.reason for e in failures()]
    page = client.get("/login/?sso=failed").content.decode()
    assert "Single sign-on did not sign you in" in page


def test_a_callback_with_a_state_this_browser_was_not_given_is_refused(provider, client):
    provider.person = bob_at_the_provider("agentgov-approvers")
    victim = client.__class__()
    to_provider = victim.get("/sso/start/")
    back = requests.get(to_provider["Location"], allow_redirects=False, timeout=10)
    callback = urlparse(back.headers["Location"])
    # The attacker's browser (another session) replays the victim's callback: refused.
    landed = client.get(f"{callback.path}?{callback.query}")
    assert landed["Location"] == "/login/?sso=failed" and signed_in_user(client) is None
    assert len(failures("state")) == 1
    # The victim's own use of it works once; a replay of it fails.
    assert victim.get(f"{callback.path}?{callback.query}")["Location"] == "/"
    victim.post("/logout/")
    assert victim.get(f"{callback.path}?{callback.query}")["Location"] == "/login/?sso=failed"
    assert signed_in_user(victim) is None
    assert len(failures("state")) == 2


def test_a_refusal_at_the_provider_is_audited(provider, client):
    provider.person = None  # the provider answers access_denied
    landed = through_provider(client)
    assert landed["Location"] == "/login/?sso=failed" and signed_in_user(client) is None
    assert len(failures("access_denied")) == 1


def test_refused_sign_ins_hit_the_sign_in_limit_for_that_address_only(provider, people, client):
    provider.person = bob_at_the_provider("agentgov-approvers")
    provider.sign_with_other_key = True  # an attacker's forged id tokens
    for _ in range(4):
        assert through_provider(client, REMOTE_ADDR=ATTACKER)["Location"] == "/login/?sso=failed"
    assert through_provider(client, REMOTE_ADDR=ATTACKER).status_code == 429  # the 5th
    provider.sign_with_other_key = False
    locked = through_provider(client, REMOTE_ADDR=ATTACKER)
    assert locked.status_code == 429 and signed_in_user(client) is None
    assert not User.objects.filter(username="bob.sso").exists()
    # Another address signs in through the provider; carol's password works from the attacker's.
    other = client.__class__()
    assert through_provider(other, REMOTE_ADDR="198.51.100.4")["Location"] == "/"
    carol = client.__class__()
    carol.post("/login/", {"username": "carol", "password": PASSWORD}, REMOTE_ADDR=ATTACKER)
    assert signed_in_user(carol) == people.carol


def test_forged_callbacks_another_site_makes_a_browser_fetch_lock_nobody_out(provider, client):
    for attempt in range(10):  # e.g. <img src="https://console/sso/callback/?code=x&state=y">
        client.get(f"/sso/callback/?code=forged&state=forged-{attempt}", REMOTE_ADDR=ATTACKER)
        client.get("/sso/callback/?error=access_denied&state=x", REMOTE_ADDR=ATTACKER)
    assert len(failures()) == 20  # each audited
    provider.person = bob_at_the_provider("agentgov-approvers")
    assert through_provider(client, REMOTE_ADDR=ATTACKER)["Location"] == "/"


def test_a_failed_callback_does_not_sign_out_whoever_is_signed_in(provider, people, client):
    client.post("/login/", {"username": "carol", "password": PASSWORD})
    client.get("/sso/callback/?code=forged&state=forged")
    assert signed_in_user(client) == people.carol


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x",
                                    "http://testserver.evil.example/"])
def test_next_cannot_send_the_browser_off_site(provider, client, target):
    provider.person = bob_at_the_provider("agentgov-approvers")
    landed = through_provider(client, start=f"/sso/start/?next={target}")
    assert landed["Location"] == "/"


def test_next_on_this_site_is_followed(provider, client):
    provider.person = bob_at_the_provider("agentgov-approvers")
    assert through_provider(client, start="/sso/start/?next=/inbox/")["Location"] == "/inbox/"


def test_the_callback_sent_to_the_provider_is_the_configured_one(provider, settings, client):
    settings.OIDC_REDIRECT_URI = CALLBACK
    to_provider = client.get("/sso/start/", HTTP_HOST="127.0.0.1")
    query = dict(pair.split("=", 1) for pair in urlparse(to_provider["Location"]).query
                 .split("&"))
    assert requests.utils.unquote(query["redirect_uri"]) == CALLBACK
    # Unconfigured, a Host header the provider never registered gets nowhere at the provider.
    settings.OIDC_REDIRECT_URI = None
    provider.person = bob_at_the_provider("agentgov-approvers")
    to_provider = client.get("/sso/start/", HTTP_HOST="127.0.0.1")
    assert requests.get(to_provider["Location"], allow_redirects=False,
                        timeout=10).status_code == 400


def test_the_sign_in_page_offers_the_provider_only_when_configured(provider, settings, client):
    assert "Sign in with Example SSO" in client.get("/login/").content.decode()
    settings.OIDC_RP_CLIENT_ID = ""
    assert "Sign in with" not in client.get("/login/").content.decode()
    assert client.get("/sso/start/").status_code == 404
    assert client.get("/sso/callback/?code=x&state=y").status_code == 404


def test_the_role_map_setting_names_real_roles(monkeypatch):
    monkeypatch.setenv("OIDC_ROLE_MAP", "agentgov-approvers=approver, eng=owner")
    assert env_role_map("OIDC_ROLE_MAP") == {"agentgov-approvers": "approver", "eng": "owner"}
    monkeypatch.setenv("OIDC_ROLE_MAP", "agentgov-approvers=superuser")
    with pytest.raises(SettingError, match="must be group=role"):
        env_role_map("OIDC_ROLE_MAP")


def test_a_provider_that_is_down_refuses_sso_and_leaves_passwords_working(people, settings,
                                                                          client):
    with LocalProvider(redirect_uris=[CALLBACK]) as gone:
        for name, value in gone.settings().items():
            setattr(settings, name, value)
    sso_provider.forget_discovery()  # the provider has stopped: nothing answers at its address
    assert client.get("/sso/start/")["Location"] == "/login/?sso=failed"
    session = client.session
    session["oidc_states"] = {"s1": {"nonce": "n1", "code_verifier": None, "added_on": 0}}
    session.save()
    assert client.get("/sso/callback/?code=c&state=s1")["Location"] == "/login/?sso=failed"
    assert len(failures("Connection")) == 1
    client.post("/login/", {"username": "carol", "password": PASSWORD})
    assert signed_in_user(client) == people.carol


def test_a_deactivated_account_cannot_sign_in_through_the_provider(provider, client):
    provider.person = bob_at_the_provider("agentgov-approvers")
    through_provider(client)
    bob = signed_in_user(client)
    client.post("/logout/")
    User.objects.filter(pk=bob.pk).update(is_active=False)
    landed = through_provider(client)
    assert landed["Location"] == "/login/?sso=failed" and signed_in_user(client) is None
    assert len(failures("deactivated")) == 1


def test_a_subject_too_long_to_store_is_refused_not_a_server_error(provider, client):
    provider.person = Person(sub="x" * 300, preferred_username="long", email="l@corp.example")
    assert through_provider(client)["Location"] == "/login/?sso=failed"
    assert not User.objects.filter(username="long").exists()
    assert len(failures("no usable subject")) == 1
