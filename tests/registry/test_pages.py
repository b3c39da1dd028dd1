"""The registry's pages as their people use them: the agent list and detail, the apply form, the
approvals inbox and proposals, and compliance's guardrails; every change goes through actions."""

import html
import re

import pytest
import yaml

from audit.models import AuditEntry
from registry import actions
from registry.choices import Role, VersionSource
from registry.manifest import validate_manifest
from registry.models import Agent, Approval, DesiredStateVersion, Guardrail
from registry.principals import AgentPrincipal
from tests.conftest import REFUND_AGENT_YAML, make_person, refund_manifest

pytestmark = pytest.mark.django_db


def page(response) -> str:
    return response.content.decode()


def manifest(name: str, owner: str = "alice", **changes):
    """A copy of the refund agent's manifest under another name; `changes` edit metadata."""
    document = yaml.safe_load(REFUND_AGENT_YAML)
    document["metadata"].update(name=name, owner=owner, **changes)
    return validate_manifest(document)


def register(people, *manifests, approve: bool = True) -> list[DesiredStateVersion]:
    outcomes = actions.apply_manifests(list(manifests), actor=people.admin,
                                       source=VersionSource.YAML)
    if approve:
        for outcome in outcomes:
            actions.approve_proposal(outcome.version.pk, actor=people.bob)
    return [o.version for o in outcomes]


def propose(agent, actor, **spec):
    agent.refresh_from_db()
    return actions.propose(agent, refund_manifest(**spec).spec, agent.active_version.metadata,
                           actor=actor, source=VersionSource.UI).version


def state_snapshot() -> tuple:
    return (list(Agent.objects.values_list("name", "generation", "active_version_id")),
            list(DesiredStateVersion.objects.values_list("id", "state", "revision")),
            Approval.objects.count(), AuditEntry.objects.count())


WIDER_DATA = [{"resource": "orders_db", "access": "read"},
              {"resource": "payments", "access": "write"},
              {"resource": "crm", "access": "admin"}]


# --- who may see what --------------------------------------------------------------------------


@pytest.fixture
def pages(refund_agent, people):
    proposal = propose(refund_agent, people.alice, tools=["orders.lookup"])
    actions.create_guardrail(actor=people.dana, name="no-admin", effect="warn",
                             expression='spec.data.all(d, d.access != "admin")',
                             message="admin access is rare")
    return {"proposal": proposal.pk}


EVERYONE = {"alice": 200, "bob": 200, "dana": 200, "admin": 200}
ACCESS = [
    ("/agents/", EVERYONE),
    ("/agents/refund-agent/", EVERYONE),
    ("/proposals/{proposal}/", EVERYONE),
    ("/guardrails/", EVERYONE),
    ("/manifests/new", {"alice": 200, "admin": 200, "bob": 403, "dana": 403}),
    ("/approvals/", {"bob": 200, "admin": 200, "alice": 403, "dana": 403}),
    ("/guardrails/new", {"dana": 200, "admin": 200, "alice": 403, "bob": 403}),
    ("/guardrails/no-admin/edit", {"dana": 200, "bob": 403}),
    ("/guardrails/no-admin/delete", {"dana": 200, "alice": 403}),
]


@pytest.mark.parametrize("path, expected", ACCESS)
def test_each_page_opens_for_its_people_and_refuses_the_others(client, people, pages, path,
                                                              expected):
    url = path.format(**pages)
    for who, status in expected.items():
        client.force_login(getattr(people, who))
        response = client.get(url)
        assert response.status_code == status, (who, url)
        if status == 403:
            assert "Not allowed" in page(response)
    client.logout()
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/?next=")


@pytest.mark.parametrize("path", ["/proposals/{proposal}/approve", "/proposals/{proposal}/reject",
                                  "/proposals/{proposal}/withdraw"])
def test_decisions_are_posts_for_signed_in_people_only(client, people, pages, path):
    url = path.format(**pages)
    anonymous = client.post(url, {"comment": "x"})
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    client.force_login(people.bob)
    assert client.get(url).status_code == 405


def test_navigation_shows_the_links_each_role_uses(client, people, pages):
    client.force_login(people.alice)
    nav = page(client.get("/agents/")).split("<main")[0]
    assert 'href="/manifests/new"' in nav and 'href="/inbox/?kind=proposal"' not in nav
    assert 'href="/agents/"' in nav and 'href="/guardrails/"' in nav
    client.force_login(people.bob)
    nav = page(client.get("/agents/")).split("<main")[0]
    assert 'href="/inbox/?kind=proposal"' in nav and 'href="/manifests/new"' not in nav
    assert re.search(r'id="inbox-count" >1</span><span class="visually-hidden"> waiting', nav)


# --- the agent list ----------------------------------------------------------------------------


@pytest.fixture
def fleet(people):
    erin = make_person("erin", Role.OWNER)
    register(people, manifest("refund-agent"),
             manifest("support-bot", owner="erin", labels={"env": "dev"},
                      description="Answers tickets"))
    support = Agent.objects.get(name="support-bot")
    actions.apply_manifests([manifest("draft-bot")], actor=people.alice,
                            source=VersionSource.YAML)
    return erin, support


@pytest.mark.parametrize("query, names", [
    ("", ["draft-bot", "refund-agent", "support-bot"]),
    ("?owner=erin", ["support-bot"]),
    ("?label=env%3Dprod", ["draft-bot", "refund-agent"]),
    ("?label=env%3Ddev&status=active", ["support-bot"]),
    ("?status=suspended", []),
    ("?q=tickets", ["support-bot"]),
    ("?q=REFUND-AG&owner=alice&framework=langgraph", ["refund-agent"]),
    ("?owner=&status=&label=&framework=&q=", ["draft-bot", "refund-agent", "support-bot"]),
])
def test_agent_list_filters(client, people, fleet, query, names):
    client.force_login(people.dana)
    response = client.get(f"/agents/{query}")
    assert response.status_code == 200
    listed = re.findall(r'<td><a href="/agents/([a-z0-9-]+)/">', page(response))
    assert listed == names


def test_agent_list_shows_each_agents_columns(client, people, fleet):
    client.force_login(people.dana)
    body = page(client.get("/agents/?owner=alice"))
    row = re.search(r'<a href="/agents/draft-bot/">.*?</tr>', body, re.S).group(0)
    # draft-bot is registered but not approved: generation 0 and one pending proposal
    assert re.findall(r'<td class="mono">(\d+)</td>', row) == ["0"]
    assert "<strong>1</strong>" in row and "langgraph" in row and "env=prod" in row
    assert "alice" in row and "active" in row


@pytest.mark.parametrize("query, message", [
    ("?status=bogus", "Select a valid choice"),
    ("?label=novalue", "expected key=value"),
    ("?label=a%3Db%3Dc", "expected a label value"),
    ("?label=regex%3D%5E(.%7C.)%7B0%2C20%7D!", "expected a label value"),
    ("?label=-x%3Dc", "expected a label key"),
])
def test_a_bad_filter_is_shown_as_an_error_not_a_crash(client, people, fleet, query, message):
    client.force_login(people.alice)
    response = client.get(f"/agents/{query}")
    assert response.status_code == 200
    body = page(response)
    assert 'class="error" role="alert"' in body and html.escape(message, quote=True) in body
    assert "/agents/refund-agent/" not in body


def test_agent_list_pages_fifty_at_a_time(client, people):
    register(people, *[manifest(f"agent-{i:02d}") for i in range(55)], approve=False)
    client.force_login(people.alice)
    first = page(client.get("/agents/?label=env%3Dprod"))
    assert first.count('<td><a href="/agents/') == 50 and "Page 1 of 2" in first
    assert 'href="?label=env%3Dprod&amp;page=2"' in first
    second = page(client.get("/agents/?label=env%3Dprod&page=2"))
    assert second.count('<td><a href="/agents/') == 5 and "agent-54" in second
    assert client.get("/agents/?page=zzz").status_code == 200


# --- the agent detail --------------------------------------------------------------------------


def test_agent_detail_shows_the_spec_history_proposals_and_audit(client, people, refund_agent):
    proposal = propose(refund_agent, people.alice, tools=["orders.lookup"])
    client.force_login(people.carol)
    body = page(client.get("/agents/refund-agent/"))
    spec = re.search(r'<pre class="yaml card"[^>]*>(.*?)</pre>', body, re.S).group(1)
    document = yaml.safe_load(html.unescape(spec))
    assert document["spec"] == refund_agent.active_version.spec
    assert document["metadata"]["owner"] == "alice"
    history = re.search(r'<table class="history">.*?</table>', body, re.S).group(0)
    rows = re.findall(r"<tr>(.*?)</tr>", history, re.S)[1:]
    assert len(rows) == 2
    assert "Pending" in rows[0] and f"#{proposal.pk}" in rows[0]
    assert "Approved" in rows[1] and "alice" in rows[1] and "bob" in rows[1]
    assert re.search(r'<td class="mono">1 <span class="badge">active</span>', rows[1])
    assert f'href="/proposals/{proposal.pk}/"' in body
    assert "agent.registered" in body and "proposal.created" in body
    assert "/audit/?agent=refund-agent" not in body  # the explorer is for compliance
    client.force_login(people.dana)
    assert "/audit/?agent=refund-agent" in page(client.get("/agents/refund-agent/"))


def test_agent_detail_marks_agent_made_versions(client, people, refund_agent):
    actions.propose(refund_agent, refund_manifest(tools=["orders.lookup"]).spec,
                    refund_agent.active_version.metadata,
                    actor=AgentPrincipal(refund_agent, None), source=VersionSource.API)
    client.force_login(people.bob)
    history = re.search(r'<table class="history">.*?</table>',
                        page(client.get("/agents/refund-agent/")), re.S).group(0)
    assert "agent-made" in history and "the agent" in history


def test_unknown_agent_is_404(client, people):
    client.force_login(people.alice)
    assert client.get("/agents/nobody/").status_code == 404


# --- applying manifests ------------------------------------------------------------------------


def test_apply_creates_the_agent_through_the_actions(client, people):
    client.force_login(people.alice)
    response = client.post("/manifests/new", {"manifest": REFUND_AGENT_YAML})
    assert response.status_code == 200
    body = page(response)
    agent = Agent.objects.get(name="refund-agent")
    version = agent.versions.get()
    assert (agent.owner, agent.generation) == (people.alice, 0)
    assert (version.state, version.source, version.proposed_by) == ("pending", "ui", people.alice)
    rows = AuditEntry.objects.filter(agent="refund-agent").order_by("seq")
    assert [(e.actor, e.action) for e in rows] == [("alice", "agent.registered"),
                                                   ("alice", "proposal.created")]
    assert "agent/refund-agent created" in body
    assert f'href="/proposals/{version.pk}/"' in body
    assert "+ tool payments.refund" in body and "▲" in body and "widening" in body
    # applying the same text again changes nothing
    again = page(client.post("/manifests/new", {"manifest": REFUND_AGENT_YAML}))
    assert "agent/refund-agent unchanged" in again
    assert DesiredStateVersion.objects.count() == 1


def test_apply_shows_guardrail_results(client, people):
    actions.create_guardrail(actor=people.dana, name="two-for-payments",
                             expression='!("payments.refund" in spec.tools)',
                             effect="require_approvals", required_approvals=2,
                             message="refunds need two approvers")
    client.force_login(people.alice)
    body = page(client.post("/manifests/new", {"manifest": REFUND_AGENT_YAML}))
    assert "two-for-payments" in body and "refunds need two approvers" in body
    assert "2 approvals needed" in body


def test_a_dry_run_changes_nothing(client, people):
    client.force_login(people.alice)
    before = state_snapshot()
    body = page(client.post("/manifests/new", {"manifest": REFUND_AGENT_YAML, "dry_run": "1"}))
    assert "Dry run: nothing was changed" in body
    assert "agent/refund-agent created</strong> (dry run)" in body
    assert "+ tool payments.refund" in body
    assert state_snapshot() == before


def test_a_bad_manifest_shows_its_line_and_changes_nothing(client, people):
    bad = REFUND_AGENT_YAML.replace("access: read}", "access: rule}", 1)
    client.force_login(people.alice)
    before = state_snapshot()
    response = client.post("/manifests/new", {"manifest": bad})
    assert response.status_code == 200
    body = page(response)
    assert state_snapshot() == before
    summary = re.search(r'<section id="error-summary".*?</section>', body, re.S).group(0)
    assert "line 15: /spec/data/0/access:" in summary
    assert 'href="#src-line-15" data-line="15"' in summary
    line = re.search(r'<li id="src-line-15" class="bad">.*?</li>', body, re.S).group(0)
    assert "✖" in line and "orders_db" in line
    assert 'id="src-line-14">' in body  # the good lines are not marked
    # the text is kept in the editor, escaped
    textarea = re.search(r'<textarea id="manifest"[^>]*>\n(.*?)</textarea>', body, re.S).group(1)
    assert html.unescape(textarea) == bad


def test_a_refusal_without_a_line_is_located_by_its_pointer(client, people):
    client.force_login(people.alice)
    theirs = REFUND_AGENT_YAML.replace("owner: alice", "owner: bob")
    body = page(client.post("/manifests/new", {"manifest": theirs}))
    assert "line 5: /metadata/owner: must be you" in body
    assert not Agent.objects.exists()


def test_an_agent_named_with_markup_cannot_exist(client, people):
    client.force_login(people.alice)
    bad = REFUND_AGENT_YAML.replace("name: refund-agent", 'name: "<b>x</b>"')
    body = page(client.post("/manifests/new", {"manifest": bad}))
    assert "line 4: /metadata/name:" in body and "<b>x</b>" not in body
    assert not Agent.objects.exists()
    assert client.get("/agents/<b>x</b>/").status_code == 404


def test_a_description_with_markup_is_escaped(client, people):
    script = "<script>alert(1)</script>"
    register(people, manifest("refund-agent", description=script))
    client.force_login(people.bob)
    for url in ("/agents/", "/agents/refund-agent/"):
        body = page(client.get(url))
        assert script not in body
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_propose_a_change_starts_from_the_active_manifest(client, people, refund_agent):
    client.force_login(people.alice)
    assert 'href="/manifests/new?agent=refund-agent"' in page(client.get("/agents/refund-agent/"))
    body = page(client.get("/manifests/new?agent=refund-agent"))
    textarea = re.search(r'<textarea id="manifest"[^>]*>\n(.*?)</textarea>', body, re.S).group(1)
    assert yaml.safe_load(html.unescape(textarea))["spec"] == refund_agent.active_version.spec


def test_a_manifest_whose_strings_look_like_numbers_applies_back_from_its_own_page(
        client, api_as, people):
    # Registered through the JSON API, where "0e0" and "1e5" are plainly strings.
    document = yaml.safe_load(REFUND_AGENT_YAML)
    document["metadata"]["labels"] = {"0e0": "1E5", "env": "prod"}
    document["spec"]["tools"] = ["0e0", "0.0", "1e5", "orders.lookup"]
    created = api_as(people.alice).post("/api/v1/manifests", document, format="json")
    assert created.status_code in (200, 201), created.content
    actions.approve_proposal(Agent.objects.get(name="refund-agent").versions.get().pk,
                             actor=people.bob)
    client.force_login(people.alice)
    register_again = page(client.get("/manifests/new?agent=refund-agent"))
    text = html.unescape(re.search(r'<textarea id="manifest"[^>]*>\n(.*?)</textarea>',
                                   register_again, re.S).group(1))
    body = page(client.post("/manifests/new", {"manifest": text}))
    assert 'id="error-summary"' not in body
    assert "agent/refund-agent unchanged" in body


# --- the approvals inbox and proposals ---------------------------------------------------------


@pytest.fixture
def two_proposals(people, refund_agent):
    """A narrowing proposal by alice, then a widening one by the agent itself."""
    narrow = propose(refund_agent, people.alice, tools=["orders.lookup"])
    wide = actions.propose(refund_agent, refund_manifest(data=WIDER_DATA).spec,
                           refund_agent.active_version.metadata,
                           actor=AgentPrincipal(refund_agent, None),
                           source=VersionSource.API).version
    assert wide.risk > narrow.risk
    return narrow, wide


def test_inbox_lists_pending_proposals_longest_waiting_first(client, people, two_proposals):
    narrow, wide = two_proposals  # narrow was proposed first: it has waited longest
    client.force_login(people.bob)
    body = page(client.get("/approvals/"))
    wide_at, narrow_at = (body.index(f'id="proposal-{v.pk}"') for v in (wide, narrow))
    assert narrow_at < wide_at
    wide_card = body[wide_at:]
    assert "agent-made" in wide_card and f"risk {wide.risk}" in wide_card
    assert "▲" in wide_card and "widening" in wide_card and "crm" in wide_card
    assert "<code>/data/" in wide_card  # the raw diff, pointers relative to the spec
    assert "0 of 1 required" in wide_card
    narrow_card = body[narrow_at:wide_at]
    assert "▼" in narrow_card and "narrowing" in narrow_card and "alice" in narrow_card
    assert body.count('name="csrfmiddlewaretoken"') >= 5  # sign-out plus two forms a proposal


def test_approving_from_the_inbox_activates_generation_two(client, people, refund_agent):
    proposal = propose(refund_agent, people.alice, tools=["orders.lookup"])
    client.force_login(people.bob)
    response = client.post(f"/proposals/{proposal.pk}/approve",
                           {"comment": "fine", "expected_generation": "1", "next": "/approvals/"},
                           follow=True)
    assert response.redirect_chain[-1][0] == "/approvals/"
    refund_agent.refresh_from_db()
    assert refund_agent.generation == 2 and refund_agent.active_version_id == proposal.pk
    assert "refund-agent is now at generation 2" in page(response)
    assert "Nothing is waiting for a decision." in page(response)
    approval = Approval.objects.get(version=proposal)
    assert (approval.approver, approval.comment) == (people.bob, "fine")


def test_an_owner_who_approves_cannot_approve_her_own_agent(client, people, refund_agent):
    actions.grant_role(people.alice, Role.APPROVER, actor="system:test")
    proposal = propose(refund_agent, people.admin, tools=["orders.lookup"])
    client.force_login(people.alice)
    queue = page(client.get("/approvals/"))  # her queue holds only what she may decide
    assert f'action="/proposals/{proposal.pk}/approve"' not in queue
    detail = page(client.get(f"/proposals/{proposal.pk}/"))
    assert "Four eyes: you own this agent" in detail
    assert f'action="/proposals/{proposal.pk}/approve"' not in detail
    before = state_snapshot()
    response = client.post(f"/proposals/{proposal.pk}/approve", {"next": "/approvals/"},
                           follow=True)
    assert "Four eyes: you cannot approve a proposal for an agent you own" in page(response)
    assert state_snapshot() == before


def test_a_stale_approval_is_refused(client, people, two_proposals):
    narrow, wide = two_proposals
    client.force_login(people.bob)
    before = state_snapshot()
    response = client.post(f"/proposals/{narrow.pk}/approve", {"expected_generation": "0"},
                           follow=True)
    assert response.redirect_chain[-1][0] == f"/proposals/{narrow.pk}/"
    assert "refund-agent is at generation 1, not 0." in page(response)
    assert state_snapshot() == before


def test_reject_needs_a_comment(client, people, two_proposals):
    narrow, _ = two_proposals
    client.force_login(people.bob)
    before = state_snapshot()
    response = client.post(f"/proposals/{narrow.pk}/reject", {"comment": "  "}, follow=True)
    assert "A rejection needs a comment." in page(response)
    assert state_snapshot() == before
    response = client.post(f"/proposals/{narrow.pk}/reject", {"comment": "keep refunds"},
                           follow=True)
    narrow.refresh_from_db()
    assert (narrow.state, narrow.decided_by, narrow.decision_comment) == (
        "rejected", people.bob, "keep refunds")
    assert "Rejected proposal" in page(response) and "keep refunds" in page(response)


def test_the_proposer_withdraws_from_the_proposal_page(client, people, two_proposals):
    narrow, wide = two_proposals
    client.force_login(people.alice)
    body = page(client.get(f"/proposals/{narrow.pk}/"))
    assert f'action="/proposals/{narrow.pk}/withdraw"' in body
    assert f'action="/proposals/{narrow.pk}/approve"' not in body  # alice is no approver
    assert f'action="/proposals/{wide.pk}/withdraw"' not in page(
        client.get(f"/proposals/{wide.pk}/"))
    before = state_snapshot()
    refused = client.post(f"/proposals/{wide.pk}/withdraw", follow=True)
    assert "Only the proposer may withdraw a proposal." in page(refused)
    assert state_snapshot() == before
    client.post(f"/proposals/{narrow.pk}/withdraw")
    narrow.refresh_from_db()
    assert narrow.state == "withdrawn"


def test_an_off_site_next_is_ignored(client, people, two_proposals):
    narrow, _ = two_proposals
    client.force_login(people.bob)
    response = client.post(f"/proposals/{narrow.pk}/approve", {"next": "https://evil.example/"})
    assert response["Location"] == f"/proposals/{narrow.pk}/"


# --- guardrails --------------------------------------------------------------------------------


GUARDRAIL = {"name": "no-crm-admin", "description": "", "effect": "deny",
             "expression": 'spec.data.all(d, d.resource != "crm" || d.access != "admin")',
             "selector": "env=prod\nteam = payments\n", "required_approvals": "2",
             "message": "no admin on crm", "enabled": "on"}


def test_compliance_creates_edits_and_deletes_a_guardrail(client, people):
    client.force_login(people.dana)
    response = client.post("/guardrails/new", GUARDRAIL)
    assert response.status_code == 302 and response["Location"] == "/guardrails/"
    guardrail = Guardrail.objects.get()
    assert guardrail.selector == {"env": "prod", "team": "payments"} and guardrail.enabled
    listing = page(client.get("/guardrails/"))
    assert "no-crm-admin" in listing and "env=prod" in listing and "Deny" in listing
    edit = page(client.get("/guardrails/no-crm-admin/edit"))
    assert "env=prod\nteam=payments" in edit
    client.post("/guardrails/no-crm-admin/edit", {**GUARDRAIL, "effect": "warn", "selector": "",
                                                  "enabled": ""})
    guardrail.refresh_from_db()
    assert (guardrail.effect, guardrail.selector, guardrail.enabled) == ("warn", {}, False)
    assert client.post("/guardrails/no-crm-admin/delete").status_code == 302
    assert not Guardrail.objects.exists()
    assert list(AuditEntry.objects.filter(target="guardrail:no-crm-admin")
                .values_list("action", flat=True)) == [
        "guardrail.created", "guardrail.updated", "guardrail.deleted"]


def test_bad_cel_re_renders_the_form_with_the_parsers_message_and_saves_nothing(client, people):
    client.force_login(people.dana)
    before = AuditEntry.objects.count()
    response = client.post("/guardrails/new", {**GUARDRAIL, "expression": "spec.tools.size( >"})
    assert response.status_code == 200
    body = page(response)
    assert re.search(r"\(line 1, column \d+\)", body)
    assert "The guardrail was not saved" in body
    assert "spec.tools.size( &gt;" in body  # the expression is kept, escaped
    assert not Guardrail.objects.exists() and AuditEntry.objects.count() == before


def test_bad_selector_and_duplicate_names_are_form_errors(client, people):
    client.force_login(people.dana)
    body = page(client.post("/guardrails/new", {**GUARDRAIL, "selector": "env prod"}))
    assert "line 1: expected key=value" in body
    client.post("/guardrails/new", GUARDRAIL)
    body = page(client.post("/guardrails/new", GUARDRAIL))
    assert "A guardrail named &#x27;no-crm-admin&#x27; exists." in body
    assert Guardrail.objects.count() == 1


def test_others_read_guardrails_without_the_controls(client, people):
    actions.create_guardrail(actor=people.dana, name="no-admin", effect="warn",
                             expression='spec.data.all(d, d.access != "admin")',
                             message="admin access is rare")
    client.force_login(people.bob)
    body = page(client.get("/guardrails/"))
    assert "no-admin" in body and "/guardrails/new" not in body and "/edit" not in body
    assert client.post("/guardrails/no-admin/delete").status_code == 403
    assert Guardrail.objects.exists()


# --- queries stay constant ---------------------------------------------------------------------


def test_agent_list_queries_do_not_grow_with_the_agents(client, people,
                                                        django_assert_max_num_queries):
    register(people, *[manifest(f"agent-{i:02d}") for i in range(5)])
    client.force_login(people.bob)
    with django_assert_max_num_queries(10) as few:
        assert client.get("/agents/").status_code == 200
    register(people, *[manifest(f"agent-{i:02d}") for i in range(5, 30)])
    with django_assert_max_num_queries(10) as many:
        assert page(client.get("/agents/")).count('<td><a href="/agents/') == 30
    assert len(many.captured_queries) == len(few.captured_queries)


def test_agent_detail_queries_do_not_grow_with_the_versions(client, people, refund_agent,
                                                            django_assert_max_num_queries):
    def add_versions(count: int) -> None:
        for _ in range(count):
            refund_agent.refresh_from_db()
            version = propose(refund_agent, people.alice,
                              version=f"3.{refund_agent.generation}.0")
            actions.approve_proposal(version.pk, actor=people.bob)
        propose(refund_agent, people.alice, tools=["orders.lookup"])  # and one pending

    add_versions(4)
    client.force_login(people.carol)
    # 21 + waivers in force + retirement + the lifecycle history + who may withdraw a waiver
    # + one more since the inbox counts and the agent header were rebuilt, + the agent's recent
    # behaviour events (constant: see below), + its Git sync status, a stop covering it and its
    # maintenance windows, + the waiver requests its owner made and the inbox count's
    # retirements, waivers and shadow requests (one query), + when it was last heard (report,
    # event, decision: one query), + the header's health read from the findings it lists (its
    # status is read twice: by the summary and by the reconciler's side of the page)
    with django_assert_max_num_queries(34) as few:
        assert client.get("/agents/refund-agent/").status_code == 200
    add_versions(25)
    with django_assert_max_num_queries(34) as many:
        body = page(client.get("/agents/refund-agent/"))
    assert "3.29.0" in body and body.count("<td>bob</td>") >= 30
    assert len(many.captured_queries) == len(few.captured_queries)
