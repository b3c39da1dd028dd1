"""One identity per MCP server (issue 29, item 1): however an owner spells the server two
agents share (host in capitals, a trailing slash, `:443`, a `?query`, a `#fragment`, a doubled
space in a stdio command), every judge reads one server: the proposal's toxic-combination
check, the fleet's observed-path check, the drift diff and the permission diff."""

import shlex
import string
from datetime import UTC, datetime

import pytest
from agentgov.mcp_identity import (
    command_identity,
    same_server,
    server_identity,
    target_identity,
    url_identity,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciliation.actions import record_observation
from reconciliation.models import Finding
from reconciliation.reconciler.diff import diff
from reconciliation.toxic_paths import record_observed_paths
from registry import actions
from registry.models import DesiredStateVersion
from registry.permission_diff import permission_diff
from tests.conftest import approved_agent, refund_manifest, token_client

RULE = {"name": "customers-never-email", "left": "data:customers_db:read",
        "right": "tool:email.send_external", "effect": "deny"}
READER = {"data": [{"resource": "customers_db", "access": "read"}]}
MAILER = {"tools": ["email.send_external"]}
URL = "https://mcp.internal/tools"
NOW = datetime(2026, 12, 2, tzinfo=UTC)
COMMAND = "npx -y @acme/mcp-tools --root /srv/tools"

# the variants, each the exact server spelled another way
URL_VARIANTS = ["https://MCP.INTERNAL/tools", "https://mcp.internal/tools/",
                "https://mcp.internal:443/tools", "https://mcp.internal/tools?x",
                "https://mcp.internal/tools#y", "HTTPS://Mcp.Internal:443/./tools/?a=1#top"]
COMMAND_VARIANTS = ["npx  -y @acme/mcp-tools --root /srv/tools",
                    "  npx -y\t@acme/mcp-tools  --root '/srv/tools' ",
                    'npx -y "@acme/mcp-tools" --root /srv/tools']


# --- the function, property-tested ---------------------------------------------------------

LABEL = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=8)
SEGMENT = st.text(string.ascii_letters + string.digits + "-._~", min_size=1, max_size=8).filter(
    lambda s: s not in (".", ".."))


@st.composite
def url_spellings(draw):
    """(the plain spelling, another spelling of the same server)."""
    scheme = draw(st.sampled_from(["http", "https"]))
    host = ".".join(draw(st.lists(LABEL, min_size=1, max_size=3)))
    port = draw(st.one_of(st.none(), st.integers(1, 65535)))
    if port == {"http": 80, "https": 443}[scheme]:
        port = None
    segments = draw(st.lists(SEGMENT, max_size=4))
    plain = f"{scheme}://{host}{f':{port}' if port else ''}" + "".join(f"/{s}" for s in segments)

    def recase(text):
        return "".join(c.upper() if draw(st.booleans()) else c for c in text)

    def escape(segment):  # percent-encode some unreserved characters, hex in either case
        return "".join(
            (f"%{ord(c):02x}" if draw(st.booleans()) else f"%{ord(c):02X}")
            if draw(st.booleans()) else c for c in segment)

    shown_port = port or (draw(st.sampled_from([None, {"http": 80, "https": 443}[scheme]])))
    path = ""
    for segment in segments:
        if draw(st.booleans()):
            path += "/./"
        if draw(st.booleans()):
            path += f"/{draw(SEGMENT)}/.."
        path += f"/{escape(segment)}" + ("/" if draw(st.booleans()) else "")
    if draw(st.booleans()):
        path += "/"
    query = draw(st.sampled_from(["", "?x", "?a=1&b=2", "?"]))
    fragment = draw(st.sampled_from(["", "#y", "#"]))
    spelled = (f"{recase(scheme)}://{recase(host)}{'.' if draw(st.booleans()) else ''}"
               f"{f':{shown_port}' if shown_port else ''}{path}{query}{fragment}")
    return plain, spelled


WORD = st.text(string.ascii_letters + string.digits + "-_./@=:", min_size=1, max_size=10)


@st.composite
def command_spellings(draw):
    argv = draw(st.lists(WORD, min_size=1, max_size=5))
    gaps = st.sampled_from([" ", "  ", "\t", " \t "])

    def quoted(word):
        return draw(st.sampled_from([word, f"'{word}'", f'"{word}"']))

    spelled = draw(st.sampled_from(["", " "])) + "".join(
        (draw(gaps) if i else "") + quoted(word) for i, word in enumerate(argv))
    return " ".join(argv), spelled + draw(st.sampled_from(["", " ", "\t"]))


@settings(max_examples=300, deadline=None)
@given(url_spellings())
def test_every_spelling_of_a_url_is_one_server(pair):
    plain, spelled = pair
    assert url_identity(spelled) == url_identity(plain)
    assert same_server({"url": spelled}, {"url": plain})
    assert target_identity(spelled) == url_identity(plain)


@settings(max_examples=300, deadline=None)
@given(command_spellings())
def test_every_spelling_of_a_command_is_one_server(pair):
    plain, spelled = pair
    assert command_identity(spelled) == command_identity(plain)
    assert shlex.split(command_identity(spelled)) == plain.split(" ")


def test_what_makes_another_server_still_does():
    different = ["http://mcp.internal/tools", "https://mcp.internal:8443/tools",
                 "https://mcp.internal/Tools", "https://mcp.internal/tools/admin",
                 "https://mcp.internal.evil/tools", "https://mcp.internal/tools%2Fadmin"]
    for url in different:
        assert url_identity(url) != url_identity(URL), url
    assert command_identity("npx -y @acme/mcp-tools") != command_identity("npx -y @acme/other")
    assert command_identity("'npx -y'") != command_identity("npx -y")  # one word, not two
    assert url_identity("https://Bücher.example/x") == "https://xn--bcher-kva.example/x"
    assert url_identity("https://user:pw@mcp.internal/tools") == url_identity(URL)


@pytest.mark.parametrize("entry", [
    {"url": "ftp://mcp.internal/tools"}, {"url": "https:///tools"},
    {"url": "https://mcp.internal:99999/"}, {"url": 7}, {"command": "npx 'unclosed"},
    {"command": "   "}, {"name": "no-where"}])
def test_what_cannot_be_read_is_refused_not_guessed(entry):
    with pytest.raises(ValueError):
        server_identity(entry)
    assert not same_server(entry, entry)


# --- every judge, through the product ------------------------------------------------------

def mcp(where: str, name: str = "tools") -> dict:
    key = "url" if where.lower().startswith("http") else "command"
    return {"name": name, "transport": "http" if key == "url" else "stdio", key: where,
            "tools": []}


@pytest.fixture
def fleet(people, db):
    """dana's rule; the mailer approved on the shared server (one over HTTP, one on stdio)."""
    actions.create_toxic_combination(actor=people.dana, **RULE)
    approved_agent(people, "support", **READER)
    return approved_agent(people, "mailer", **MAILER,
                          mcp_servers=[mcp(URL), mcp(COMMAND, "local")])


@pytest.mark.django_db
@pytest.mark.parametrize("where", [URL, *URL_VARIANTS, COMMAND, *COMMAND_VARIANTS])
def test_a_proposal_joining_the_shared_server_is_refused_however_it_is_spelled(
        people, api_as, fleet, where):
    before = DesiredStateVersion.objects.count()
    response = api_as(people.alice).post(
        "/api/v1/agents/support/proposals",
        {"spec": refund_manifest(**READER, mcp_servers=[mcp(where, "shared")]).spec},
        format="json")
    assert response.status_code == 422, response.json()
    assert response.json()["error"]["code"] == "guardrail_denied"
    (detail,) = response.json()["error"]["details"]
    assert detail["guardrail"] == "toxic:customers-never-email"
    assert detail["path"]["agents"] == ["support", "mailer"]
    via = detail["path"]["hops"][0]["via"]
    assert via in (f"mcp:{URL}", f"mcp:{command_identity(COMMAND)}")
    assert DesiredStateVersion.objects.count() == before


@pytest.mark.django_db
def test_another_server_is_not_refused(people, api_as, fleet):
    response = api_as(people.alice).post(
        "/api/v1/agents/support/proposals",
        {"spec": refund_manifest(**READER, mcp_servers=[
            mcp("https://mcp.internal:8443/tools", "a"), mcp("npx -y @acme/other", "b")]).spec},
        format="json")
    assert response.status_code in (200, 201), response.json()


@pytest.mark.django_db
@pytest.mark.parametrize("bad, pointer", [
    ({"transport": "stdio", "command": "npx 'unclosed"}, "/spec/mcp_servers/0/command"),
    ({"transport": "http", "url": "https://" + "a" * 64 + "ü.example/"},
     "/spec/mcp_servers/0/url")])
def test_a_server_no_judge_could_identify_is_not_approvable(people, api_as, fleet, bad,
                                                            pointer):
    document = refund_manifest(**READER).spec
    document["mcp_servers"] = [{"name": "odd", "tools": [], **bad}]
    response = api_as(people.alice).post("/api/v1/agents/support/proposals",
                                         {"spec": document}, format="json")
    assert response.status_code == 422, response.json()
    assert pointer in [d["pointer"] for d in response.json()["error"]["details"]]


@pytest.mark.django_db
@pytest.mark.parametrize("spelled", [*URL_VARIANTS[:5], COMMAND_VARIANTS[0]])
def test_the_fleets_observed_path_check_meets_every_spelling(people, fleet, spelled):
    support = fleet.__class__.objects.get(name="support")
    exact = URL if spelled.lower().startswith("http") else COMMAND
    reported = token_client(people, support).put(
        "/api/v1/agents/support/observed-state",
        {"running": True, **READER, "tools": [], "mcp_servers": [mcp(spelled, "shared")]},
        format="json")
    assert reported.status_code == 202, reported.json()
    record_observation(fleet, {"running": True, **MAILER, "mcp_servers": [mcp(exact)]},
                       actor="system:test", source="push", trigger_reconcile=False)
    record_observed_paths()
    opened = Finding.objects.filter(kind="toxic_path", status="open")
    assert sorted(opened.values_list("agent__name", flat=True)) == ["mailer", "support"]


@pytest.mark.django_db
def test_an_observed_server_unreadable_by_the_identity_is_refused(people, fleet):
    support = fleet.__class__.objects.get(name="support")
    response = token_client(people, support).put(
        "/api/v1/agents/support/observed-state",
        {"running": True, "mcp_servers": [{"name": "odd", "transport": "stdio",
                                           "command": "npx 'unclosed"}]}, format="json")
    assert response.status_code in (400, 422)
    assert "/mcp_servers/0/command" in str(response.json())


def test_a_respelled_server_is_neither_drift_nor_a_permission_change():
    approved = refund_manifest(mcp_servers=[mcp(URL), mcp(COMMAND, "local")]).spec
    for url, command in zip(URL_VARIANTS, COMMAND_VARIANTS * 2, strict=False):
        observed = {"mcp_servers": [mcp(url), mcp(command, "local")]}
        assert [d for d in diff(approved, observed, NOW) if d.pointer.startswith("/mcp_servers")] \
            == []
        respelled = refund_manifest(mcp_servers=[mcp(url), mcp(command, "local")]).spec
        assert [c for c in permission_diff(approved, respelled)
                if c.pointer.startswith("/mcp_servers")] == []
    moved = {"mcp_servers": [mcp("https://mcp.internal:8443/tools"), mcp(COMMAND, "local")]}
    (drift,) = [d for d in diff(approved, moved, NOW) if d.pointer.startswith("/mcp_servers")]
    assert drift.pointer == "/mcp_servers/tools/url"


def test_the_proxy_finds_its_approved_server_however_the_upstream_is_spelled():
    from agentgov.mcp_proxy import _reached_at

    for url in URL_VARIANTS:
        assert _reached_at(mcp(URL), url)
    for command in COMMAND_VARIANTS:
        assert _reached_at(mcp(COMMAND, "local"), command)
    assert not _reached_at(mcp(URL), "https://mcp.internal:8443/tools")
    assert not _reached_at(mcp(COMMAND, "local"), "npx 'unclosed")
