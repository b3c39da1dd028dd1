"""erin, an owner, attacks through her agent's http connector: other owners' platform secrets,
the control plane's own secrets, replayed signatures, and the control plane as a probe of the
network behind it (loopback, link-local, redirects, DNS rebinding). alice's real platform and
erin's servers run side by side on loopback."""

import http.client
import socket
from html import escape

import pytest
import yaml

from reconciliation import actions
from reconciliation.connectors import ConnectorError
from registry import actions as registry_actions
from registry.choices import Role
from registry.models import Agent
from tests.conftest import REFUND_AGENT_YAML, make_person
from tests.reconciliation.platform_server import Platform

pytestmark = pytest.mark.django_db
ALICE_SECRET = "alice-platform-secret"
ERIN_SECRET = "erin-platform-secret"
UNREACHABLE = "platform unreachable"


@pytest.fixture
def erin(people):
    return make_person("erin", Role.OWNER)


@pytest.fixture
def alice_platform(monkeypatch):
    monkeypatch.setenv("PLATFORM_SECRET", ALICE_SECRET)
    with Platform(ALICE_SECRET) as server:
        yield server


@pytest.fixture
def erin_server(monkeypatch):
    """erin's own server: it answers like a platform and keeps every request it gets."""
    monkeypatch.setenv("ERIN_SECRET", ERIN_SECRET)
    with Platform(ERIN_SECRET) as server:
        yield server


@pytest.fixture
def admin_config(settings, people, erin, alice_platform, erin_server):
    """What the admin configured: two platforms, each with its own secret, each granted to its
    owner only."""
    settings.CONNECTOR_SECRETS = ["PLATFORM_SECRET", "ERIN_SECRET"]
    settings.CONNECTOR_ALLOWED_HOSTS = [f"127.0.0.1:{alice_platform.port}",
                                        f"127.0.0.1:{erin_server.port}"]
    registry_actions.grant_connector_secret("PLATFORM_SECRET", people.alice, actor=people.admin)
    registry_actions.grant_connector_secret("ERIN_SECRET", erin, actor=people.admin)
    return settings


def manifest_yaml(name: str, owner: str, connector: dict) -> str:
    document = yaml.safe_load(REFUND_AGENT_YAML)
    document["metadata"].update(name=name, owner=owner)
    document["spec"]["connector"] = connector
    return yaml.safe_dump(document)


def apply_as(api_as, user, name: str, connector: dict):
    return api_as(user).post("/api/v1/manifests", manifest_yaml(name, user.username, connector),
                             content_type="application/yaml")


def approved_http_agent(people, api_as, user, name: str, url: str, secret: str,
                        platform: Platform | None = None) -> Agent:
    """Registered over the API by `user`, approved by bob; the platform runs it with drift."""
    answer = apply_as(api_as, user, name, {"type": "http", "url": url, "secret_env": secret})
    assert answer.status_code == 201, answer.content
    registry_actions.approve_proposal(Agent.objects.get(name=name).versions.get().pk,
                                      actor=people.bob)
    if platform is not None:
        spec = yaml.safe_load(REFUND_AGENT_YAML)["spec"]
        platform.states[name] = {**{k: v for k, v in spec.items() if k != "enforcement"},
                                 "connector": {"type": "http", "url": url, "secret_env": secret},
                                 "running": True, "tools": [*spec["tools"], "crm.search"]}
    return Agent.objects.get(name=name)


def resend(platform: Platform, request: dict, *, path: str | None = None,
           method: str | None = None, headers: dict | None = None) -> int:
    """erin replays a request she captured, changed as she likes; the platform's status."""
    connection = http.client.HTTPConnection("127.0.0.1", platform.port, timeout=5)
    sent = {k: v for k, v in request["headers"].items() if k.lower() not in ("host",)}
    sent.update(headers or {})
    connection.request(method or request["method"], path or request["path"],
                       body=request["body"] or None, headers=sent)
    status = connection.getresponse().status
    connection.close()
    return status


# --- 1. another owner's platform secret, and the control plane's own ------------------------


def test_erin_cannot_sign_her_connector_with_alices_platform_secret(
        people, erin, api_as, admin_config, alice_platform, erin_server):
    answer = apply_as(api_as, erin, "erin-agent", {
        "type": "http", "url": erin_server.url, "secret_env": "PLATFORM_SECRET"})
    assert answer.status_code == 422, answer.content
    error = answer.json()["error"]
    assert error["code"] == "invalid_connector"
    assert [d["pointer"] for d in error["details"]] == ["/spec/connector/secret_env"]
    assert not Agent.objects.filter(name="erin-agent").exists()
    assert erin_server.received == [] and alice_platform.received == []


@pytest.mark.parametrize("secret", ["SECRET_KEY", "AUDIT_SIGNING_KEY", "REDIS_URL",
                                    "DATABASE_URL", "DECISION_WEBHOOK_SECRET", "HOME",
                                    "NO_SUCH_VARIABLE_ANYWHERE", "PLATFORM_SECRET"])
def test_no_environment_variable_can_be_named_and_the_answer_never_tells_which_exist(
        people, erin, api_as, admin_config, erin_server, monkeypatch, secret):
    for name in ("SECRET_KEY", "AUDIT_SIGNING_KEY", "REDIS_URL", "DATABASE_URL",
                 "DECISION_WEBHOOK_SECRET"):
        monkeypatch.setenv(name, f"the-control-plane's-{name}")
    answer = apply_as(api_as, erin, "erin-agent", {
        "type": "http", "url": erin_server.url, "secret_env": secret})
    assert answer.status_code == 422, answer.content
    assert answer.json()["error"] == {
        "code": "invalid_connector",
        "message": "erin-agent: expected a connector secret an admin granted to erin",
        "details": [{"pointer": "/spec/connector/secret_env",
                     "message": "expected a connector secret an admin granted to erin"}]}
    assert erin_server.received == []  # no request signed under anything, ever


def test_a_compromised_agent_cannot_propose_a_connector_with_a_secret_not_granted(
        people, erin, api_as, admin_config, erin_server):
    from rest_framework.test import APIClient

    agent = approved_http_agent(people, api_as, erin, "erin-agent", erin_server.url,
                                "ERIN_SECRET", erin_server)
    spec = dict(agent.active_version.spec, connector={
        "type": "http", "url": erin_server.url, "secret_env": "PLATFORM_SECRET"})
    _, key = registry_actions.issue_agent_token(agent, actor=erin)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    answer = client.post("/api/v1/agents/erin-agent/proposals", {"spec": spec}, format="json")
    assert answer.status_code == 422, answer.content
    assert answer.json()["error"]["details"][0]["pointer"] == "/spec/connector/secret_env"
    assert agent.versions.count() == 1


def test_a_handed_over_agent_does_not_carry_its_secret_grant_to_the_new_owner(
        people, erin, api_as, admin_config, erin_server):
    agent = approved_http_agent(people, api_as, erin, "erin-agent", erin_server.url,
                                "ERIN_SECRET", erin_server)
    answer = apply_as(api_as, erin, "erin-agent", {
        "type": "http", "url": erin_server.url, "secret_env": "ERIN_SECRET"})
    assert answer.status_code == 200  # unchanged
    handover = manifest_yaml("erin-agent", "alice", {
        "type": "http", "url": erin_server.url, "secret_env": "ERIN_SECRET"})
    answer = api_as(erin).post("/api/v1/manifests", handover, content_type="application/yaml")
    assert answer.status_code == 422, answer.content
    assert "granted to alice" in answer.json()["error"]["details"][0]["message"]
    registry_actions.revoke_connector_secret("ERIN_SECRET", erin, actor=people.admin)
    with pytest.raises(ConnectorError, match=f"^{UNREACHABLE}$"):
        actions.reconcile_agent(agent.pk, trigger="manual")
    assert erin_server.received == []  # a revoked grant signs nothing more


def test_an_agent_registered_before_grants_signs_nothing_with_a_secret_not_granted(
        people, erin, api_as, admin_config, erin_server):
    """A row from before the upgrade: erin's approved agent names alice's platform secret."""
    agent = approved_http_agent(people, api_as, erin, "erin-agent", erin_server.url,
                                "ERIN_SECRET", erin_server)
    legacy = {**agent.connector, "secret_env": "PLATFORM_SECRET"}
    Agent.objects.filter(pk=agent.pk).update(connector=legacy)
    with pytest.raises(ConnectorError, match=f"^{UNREACHABLE}$"):
        actions.reconcile_agent(agent.pk, trigger="manual")
    assert erin_server.received == []


def test_the_admin_grants_lists_and_revokes_from_the_command_line(people, erin, settings,
                                                                   monkeypatch):
    from io import StringIO

    from django.core.management import CommandError, call_command

    settings.CONNECTOR_SECRETS = ["PLATFORM_SECRET", "ERIN_SECRET"]
    monkeypatch.setenv("PLATFORM_SECRET", ALICE_SECRET)
    monkeypatch.delenv("ERIN_SECRET", raising=False)

    def run(*args: str) -> str:
        out = StringIO()
        call_command("connector_secret", *args, stdout=out)
        return out.getvalue()

    assert run("grant", "PLATFORM_SECRET", "alice") == "PLATFORM_SECRET → alice: granted\n"
    assert "already granted" in run("grant", "PLATFORM_SECRET", "alice")
    assert run("list") == ("PLATFORM_SECRET (set): alice\n"
                           "ERIN_SECRET (NOT SET): nobody\n")
    with pytest.raises(CommandError, match="not in CONNECTOR_SECRETS"):
        run("grant", "SECRET_KEY", "erin")
    assert run("revoke", "PLATFORM_SECRET", "alice") == "PLATFORM_SECRET → alice: revoked\n"
    assert run("list").startswith("PLATFORM_SECRET (set): nobody")


def test_the_control_planes_own_secrets_cannot_be_declared_connector_secrets():
    import subprocess
    import sys

    from tests.conftest import ROOT, child_env

    for name in ("SECRET_KEY", "DATABASE_URL", "AUDIT_SIGNING_KEY_FILE", "AUDIT_ED25519_KEY"):
        done = subprocess.run(
            [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
            env=child_env(CONNECTOR_SECRETS=f"PLATFORM_SECRET,{name}"), timeout=120)
        assert done.returncode != 0
        assert "is the control plane's own secret" in done.stderr


def test_only_an_admin_grants_a_secret_and_each_grant_is_audited(people, erin, settings):
    from audit.models import AuditEntry
    from config.errors import Invalid, NotAllowed

    settings.CONNECTOR_SECRETS = ["PLATFORM_SECRET"]
    with pytest.raises(NotAllowed):
        registry_actions.grant_connector_secret("PLATFORM_SECRET", erin, actor=erin)
    with pytest.raises(Invalid):
        registry_actions.grant_connector_secret("SECRET_KEY", erin, actor=people.admin)
    registry_actions.grant_connector_secret("PLATFORM_SECRET", erin, actor=people.admin)
    registry_actions.revoke_connector_secret("PLATFORM_SECRET", erin, actor=people.admin)
    assert list(AuditEntry.objects.filter(target="user:erin").order_by("seq")
                .values_list("action", flat=True))[-2:] == [
        "connector_secret.granted", "connector_secret.revoked"]


# --- 1. signed requests cannot be replayed elsewhere, differently, or later ------------------


def test_a_captured_signed_request_cannot_be_replayed_to_another_agent_or_later(
        people, erin, api_as, admin_config, alice_platform, erin_server, monkeypatch):
    """The admin reused one secret for two platforms (erin's server and alice's): erin gets
    correctly signed requests for her agent, and replays them at alice's platform."""
    monkeypatch.setenv("ERIN_SECRET", ALICE_SECRET)
    erin_server.secret = ALICE_SECRET
    alice_agent = approved_http_agent(people, api_as, people.alice, "refund-agent",
                                      alice_platform.url, "PLATFORM_SECRET", alice_platform)
    erin_agent = approved_http_agent(people, api_as, erin, "erin-agent", erin_server.url,
                                     "ERIN_SECRET", erin_server)
    alice_platform.states["erin-agent"] = dict(erin_server.states["erin-agent"])
    assert actions.reconcile_agent(erin_agent.pk, trigger="manual").result == "corrected"
    change = next(r for r in erin_server.received if r["method"] == "POST")
    assert "crm.search" in alice_platform.states["refund-agent"]["tools"]
    before = alice_platform.apply_count
    assert resend(alice_platform, change, path="/agents/refund-agent/changes") == 401
    assert resend(alice_platform, change, method="PUT") in (401, 501)
    assert resend(alice_platform, change, headers={"Idempotency-Key": "another-key"}) == 401
    alice_platform.clock_offset = 301  # the same request, five minutes later
    assert resend(alice_platform, change) == 401
    alice_platform.clock_offset = 0
    assert resend(alice_platform, change) == 200  # inside the window: the key makes it a no-op
    assert resend(alice_platform, change) == 200
    assert alice_platform.apply_count == before + 1
    assert "crm.search" in alice_platform.states["refund-agent"]["tools"]
    assert actions.reconcile_agent(alice_agent.pk, trigger="manual").result == "corrected"
    assert "crm.search" not in alice_platform.states["refund-agent"]["tools"]


# --- 3. the control plane as a probe: addresses, redirects, rebinding, error texts ----------


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",
    "http://127.0.0.1:{internal}/",
    "http://localhost:{internal}/",
    "http://[::1]:{internal}/",
    "http://[::ffff:127.0.0.1]:{internal}/",
    "http://10.0.0.7:{alice}/",
    "http://2130706433:{internal}/",
])
def test_a_connector_url_outside_the_allow_list_is_refused_at_apply(
        people, erin, api_as, admin_config, alice_platform, url):
    with Platform("internal") as internal:
        answer = apply_as(api_as, erin, "erin-agent", {
            "type": "http", "url": url.format(internal=internal.port, alice=alice_platform.port),
            "secret_env": "ERIN_SECRET"})
        assert internal.received == []
    assert answer.status_code == 422, answer.content
    assert "/spec/connector/url" in [d["pointer"] for d in answer.json()["error"]["details"]]
    assert not Agent.objects.filter(name="erin-agent").exists()


@pytest.fixture
def dns(monkeypatch):
    """A resolver for `*.test` names: name -> list of answers, one per lookup (last repeats)."""
    answers: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".test"):
            queue = answers.get(host)
            if not queue:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            address = queue.pop(0) if len(queue) > 1 else queue[0]
            return real(address, port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


def test_an_allowed_name_that_resolves_inside_is_not_called(
        people, erin, api_as, admin_config, dns, settings):
    with Platform(ERIN_SECRET) as internal:  # a service on the control plane's loopback
        settings.CONNECTOR_ALLOWED_HOSTS = [*settings.CONNECTOR_ALLOWED_HOSTS,
                                            f"*.platforms.test:{internal.port}"]
        dns["erin.platforms.test"] = ["127.0.0.1"]
        agent = approved_http_agent(people, api_as, erin, "erin-agent",
                                    f"http://erin.platforms.test:{internal.port}", "ERIN_SECRET",
                                    internal)
        with pytest.raises(ConnectorError, match=f"^{UNREACHABLE}$") as failure:
            actions.reconcile_agent(agent.pk, trigger="manual")
        assert "127.0.0.1" in failure.value.detail
        dns["erin.platforms.test"] = ["169.254.169.254"]
        with pytest.raises(ConnectorError, match=f"^{UNREACHABLE}$"):
            actions.reconcile_agent(agent.pk, trigger="manual")
        assert internal.received == []


def test_dns_rebinding_between_check_and_connect_reaches_nothing_inside(
        people, api_as, admin_config, dns, settings, monkeypatch):
    """platform.test answers the platform's address, then an internal service's (same port)."""
    internal = Platform(ALICE_SECRET, host="127.0.0.2")
    with internal, Platform(ALICE_SECRET, port=internal.port) as platform:
        settings.CONNECTOR_ALLOWED_HOSTS = [f"platform.test:{platform.port}",
                                            f"127.0.0.1:{platform.port}"]
        dns["platform.test"] = ["127.0.0.1"]
        agent = approved_http_agent(people, api_as, people.alice, "refund-agent",
                                    f"http://platform.test:{platform.port}", "PLATFORM_SECRET",
                                    platform)
        internal.states["refund-agent"] = dict(platform.states["refund-agent"])
        dns["platform.test"] = ["127.0.0.1", "127.0.0.2"]  # rebinds after the first lookup
        with pytest.raises(ConnectorError, match=f"^{UNREACHABLE}$"):
            actions.reconcile_agent(agent.pk, trigger="manual")
        assert [r["method"] for r in platform.received] == ["GET"]
        assert internal.received == []


def test_a_redirect_is_not_followed_and_the_signature_goes_nowhere_else(
        people, erin, api_as, admin_config, alice_platform, erin_server):
    agent = approved_http_agent(people, api_as, people.alice, "refund-agent",
                                alice_platform.url, "PLATFORM_SECRET", alice_platform)
    for target in (erin_server.url, "ftp://127.0.0.1:21"):
        alice_platform.redirect_to = target
        with pytest.raises(ConnectorError, match=f"^{UNREACHABLE}$") as failure:
            actions.reconcile_agent(agent.pk, trigger="manual")
        assert "302" in failure.value.detail
    assert len(alice_platform.received) == 2 and erin_server.received == []


def test_every_failure_reads_the_same_on_the_agent_page(
        people, erin, api_as, admin_config, alice_platform, client, settings, monkeypatch):
    """Closed port, refused address, redirect, wrong secret, refusal: one text for everyone
    but the log, so the page is no port scanner."""
    agent = approved_http_agent(people, api_as, people.alice, "refund-agent",
                                alice_platform.url, "PLATFORM_SECRET", alice_platform)
    failures = [
        lambda: setattr(alice_platform, "redirect_to", "http://127.0.0.1:1"),
        lambda: setattr(alice_platform, "refuse_changes", True),
        lambda: monkeypatch.setenv("PLATFORM_SECRET", "wrong"),
        lambda: setattr(settings, "CONNECTOR_ALLOWED_HOSTS", ["127.0.0.1:1"]),
        lambda: alice_platform.__exit__(),  # closed port
    ]
    details, allowed = set(), settings.CONNECTOR_ALLOWED_HOSTS
    for fail in failures:
        fail()
        with pytest.raises(ConnectorError) as failure:
            actions.reconcile_agent(agent.pk, trigger="manual")
        details.add(failure.value.detail)
        alice_platform.redirect_to, alice_platform.refuse_changes = None, False
        monkeypatch.setenv("PLATFORM_SECRET", ALICE_SECRET)
        settings.CONNECTOR_ALLOWED_HOSTS = allowed
    assert len(details) == len(failures)  # the log tells them apart
    assert set(agent.runs.values_list("error", flat=True)) == {UNREACHABLE}
    for reader in (people.alice, people.bob, people.dana):  # everyone who sees runs but admin
        client.force_login(reader)
        page = client.get("/agents/refund-agent/").content.decode()
        assert page.count(f"failed: {UNREACHABLE}") == len(failures)
        assert not any(escape(detail) in page for detail in details)
    client.force_login(erin)  # another owner sees no runs of alice's agent at all
    page = client.get("/agents/refund-agent/").content.decode()
    assert f"failed: {UNREACHABLE}" not in page
    assert not any(escape(detail) in page for detail in details)
    client.force_login(people.admin)
    page = client.get("/agents/refund-agent/").content.decode()
    assert all(escape(detail) in page for detail in details)


def test_an_answer_that_is_not_a_json_object_fails_cleanly(
        people, api_as, admin_config, alice_platform):
    agent = approved_http_agent(people, api_as, people.alice, "refund-agent",
                                alice_platform.url, "PLATFORM_SECRET", alice_platform)
    alice_platform.states["refund-agent"] = ["not", "a", "state"]
    with pytest.raises(ConnectorError, match=f"^{UNREACHABLE}$"):
        actions.reconcile_agent(agent.pk, trigger="manual")
    assert not agent.observations.exists()
