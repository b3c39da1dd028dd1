"""Toxic combinations through the product: dana declares that customer data and external
email must never meet; a proposal that would join them is stopped with the path shown, an
observed path is a finding, and removing either side's permission clears both."""

import pytest

from audit.models import AuditEntry
from config.errors import Invalid
from reconciliation.actions import record_observation
from reconciliation.models import Finding
from reconciliation.toxic_paths import record_observed_paths
from registry import actions
from registry.choices import VersionSource
from registry.models import DesiredStateVersion, ToxicCombination
from tests.conftest import approved_agent, refund_manifest, token_client

pytestmark = pytest.mark.django_db

RULE = {"name": "customers-never-email", "left": "data:customers_db:read",
        "right": "tool:email.send_external", "effect": "deny",
        "description": "customer data must not leave by email"}
READER = {"data": [{"resource": "customers_db", "access": "read"}]}
MAILER = {"tools": ["email.send_external"]}


@pytest.fixture
def fleet(people):
    support = approved_agent(people, "support", **READER)
    mailer = approved_agent(people, "mailer", **MAILER)
    return support, mailer


def propose(people, agent, **spec):
    return actions.propose(agent, refund_manifest(**spec).spec, agent.active_version.metadata,
                           actor=people.alice, source=VersionSource.API)


def test_dana_declares_a_rule_through_the_api_audited_and_others_may_only_read(
        people, api_as, fleet):
    assert api_as(people.alice).post("/api/v1/toxic-combinations", RULE,
                                     format="json").status_code == 403
    assert api_as(people.bob).post("/api/v1/toxic-combinations", RULE,
                                   format="json").status_code == 403
    support, _ = fleet
    assert token_client(people, support).post("/api/v1/toxic-combinations", RULE,
                                              format="json").status_code in (401, 403)
    assert not ToxicCombination.objects.exists()
    bad = api_as(people.dana).post("/api/v1/toxic-combinations",
                                   {**RULE, "left": "customers_db"}, format="json")
    assert bad.status_code == 422
    assert bad.json()["error"]["details"][0]["pointer"] == "/left"
    made = api_as(people.dana).post("/api/v1/toxic-combinations", RULE, format="json")
    assert made.status_code == 201, made.json()
    again = api_as(people.dana).post("/api/v1/toxic-combinations", RULE, format="json")
    assert again.status_code in (400, 409)
    entry = AuditEntry.objects.get(action="toxic_rule.created")
    assert entry.target == "toxic:customers-never-email" and entry.after["left"] == RULE["left"]
    listed = api_as(people.alice).get("/api/v1/toxic-combinations").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [r["name"] for r in rows] == ["customers-never-email"]


def test_a_proposal_that_would_delegate_across_the_pair_is_denied_with_the_path(
        people, api_as, fleet):
    support, mailer = fleet
    actions.create_toxic_combination(actor=people.dana, **RULE)
    before = DesiredStateVersion.objects.count()
    with pytest.raises(Invalid) as refused:
        propose(people, support, delegates_to=["mailer"], **READER)
    assert refused.value.code == "guardrail_denied"
    (detail,) = refused.value.details
    assert detail["guardrail"] == "toxic:customers-never-email"
    assert detail["path"]["agents"] == ["support", "mailer"]
    assert detail["path"]["hops"] == [{"from": "support", "to": "mailer", "via": "delegates_to"}]
    assert DesiredStateVersion.objects.count() == before
    # through the API: a server only the mailer uses joins nobody; the reader joining it does
    server = "https://mcp.internal/tools"
    mailer_side = {"name": "tools", "transport": "http", "url": server, "tools": []}
    reader_side = {"name": "shared-tools", "transport": "http", "url": server, "tools": []}
    version = propose(people, mailer, **MAILER, mcp_servers=[mailer_side]).version
    actions.approve_proposal(version.pk, actor=people.bob)
    response = api_as(people.alice).post(
        "/api/v1/agents/support/proposals",
        {"spec": refund_manifest(**READER, mcp_servers=[reader_side]).spec}, format="json")
    assert response.status_code == 422, response.json()
    (detail,) = response.json()["error"]["details"]
    assert detail["path"]["hops"] == [{"from": "support", "to": "mailer", "via": f"mcp:{server}"}]


def test_require_approvals_shows_the_path_on_the_proposal_page_and_needs_two(
        people, client, fleet):
    support, _ = fleet
    actions.create_toxic_combination(actor=people.dana, **{**RULE, "effect":
                                                           "require_approvals"})
    version = propose(people, support, delegates_to=["mailer"], **READER).version
    assert version.required_approvals == 2
    (result,) = [r for r in version.guardrail_results
                 if r["guardrail"] == "toxic:customers-never-email"]
    assert result["outcome"] == "requires_approvals"
    assert result["path"]["description"] == (
        "support (can read customers_db) -> mailer (can use email.send_external) "
        "(support calls mailer)")
    client.force_login(people.bob)
    page = client.get(f"/proposals/{version.pk}/").content.decode()
    assert "toxic:customers-never-email" in page
    assert "support</code> <span class=\"muted\">(data:customers_db:read)</span> → " \
           "<code>mailer</code>" in page
    actions.approve_proposal(version.pk, actor=people.bob)
    assert DesiredStateVersion.objects.get(pk=version.pk).state == "pending"
    actions.approve_proposal(version.pk, actor=people.carol)
    assert DesiredStateVersion.objects.get(pk=version.pk).state == "approved"


def test_removing_either_sides_permission_lets_the_proposal_through(people, fleet):
    support, mailer = fleet
    actions.create_toxic_combination(actor=people.dana, **RULE)
    with pytest.raises(Invalid):
        propose(people, support, delegates_to=["mailer"], **READER)
    dropped = propose(people, mailer, tools=["orders.lookup"]).version
    actions.approve_proposal(dropped.pk, actor=people.bob)
    outcome = propose(people, support, delegates_to=["mailer"], **READER)
    assert all(r["outcome"] != "denied" for r in outcome.version.guardrail_results)


def test_a_pending_proposal_is_refused_at_approval_when_the_fleet_moved(people, fleet):
    support, mailer = fleet
    actions.create_toxic_combination(actor=people.dana, **RULE)
    mailer_off = propose(people, mailer, tools=["orders.lookup"]).version
    actions.approve_proposal(mailer_off.pk, actor=people.bob)
    pending = propose(people, support, delegates_to=["mailer"], **READER).version
    assert not any(r.get("path") for r in pending.guardrail_results)  # mailer cannot email
    # the mailer gets its tool back first (no path: support's delegation is not approved)
    mailer_on = propose(people, mailer, **MAILER).version
    actions.approve_proposal(mailer_on.pk, actor=people.bob)
    with pytest.raises(Invalid) as refused:
        actions.approve_proposal(pending.pk, actor=people.bob)
    assert refused.value.details[0]["path"]["agents"] == ["support", "mailer"]
    pending.refresh_from_db()
    assert pending.state == "pending" and not pending.approvals.exists()


def test_an_observed_path_is_a_finding_on_both_ends_and_clears_when_a_side_goes(
        people, fleet, django_capture_on_commit_callbacks):
    support, mailer = fleet
    actions.create_toxic_combination(actor=people.dana, **RULE)
    record_observation(support, {**READER, "tools": [], "delegates_to": ["mailer"]},
                       actor="platform", source="push", trigger_reconcile=False)
    record_observation(mailer, {**MAILER}, actor="platform", source="push",
                       trigger_reconcile=False)
    assert record_observed_paths() == {"paths": 1, "cleared": 0}
    findings = Finding.objects.filter(kind="toxic_path").order_by("agent__name")
    assert [(f.agent.name, f.status) for f in findings] == [("mailer", "open"),
                                                            ("support", "open")]
    assert findings[0].actual["agents"] == ["support", "mailer"]
    assert record_observed_paths() == {"paths": 1, "cleared": 0}  # no second finding
    assert Finding.objects.filter(kind="toxic_path").count() == 2
    opened = AuditEntry.objects.filter(action="finding.opened", target__in=[
        f"finding:{f.pk}" for f in findings]).count()
    assert opened == 2
    record_observation(mailer, {"tools": []}, actor="platform", source="push",
                       trigger_reconcile=False)
    assert record_observed_paths() == {"paths": 0, "cleared": 2}
    assert set(Finding.objects.filter(kind="toxic_path").values_list("status", flat=True)) == {
        "resolved"}
    assert AuditEntry.objects.filter(action="finding.resolved").count() >= 2


def test_the_page_lists_rules_and_paths_and_only_compliance_may_declare(people, client, fleet):
    client.force_login(people.alice)
    assert client.post("/toxic/", RULE).status_code == 403
    assert not ToxicCombination.objects.exists()
    client.force_login(people.dana)
    assert client.post("/toxic/", {**RULE, "right": "email"}).status_code == 400
    response = client.post("/toxic/", {**RULE, "required_approvals": 2})
    assert response.status_code == 302
    page = client.get("/toxic/").content.decode()
    assert "customers-never-email" in page and "tool:email.send_external" in page
    assert client.post("/toxic/customers-never-email/delete").status_code == 302
    assert not ToxicCombination.objects.exists()
    assert AuditEntry.objects.filter(action="toxic_rule.deleted").count() == 1


def test_paths_api_shows_observed_paths_to_reviewers_only(people, api_as, fleet):
    support, mailer = fleet
    actions.create_toxic_combination(actor=people.dana, **RULE)
    record_observation(support, {**READER, "delegates_to": ["mailer"]}, actor="platform",
                       source="push", trigger_reconcile=False)
    record_observation(mailer, MAILER, actor="platform", source="push",
                       trigger_reconcile=False)
    owner = api_as(people.alice).get("/api/v1/toxic-combinations/paths").json()
    # what agents really run with is not an owner's to see
    assert (owner["approved"], owner["approved_count"]) == ([], 0) and "observed" not in owner
    reviewer = api_as(people.dana).get("/api/v1/toxic-combinations/paths").json()
    assert [p["agents"] for p in reviewer["observed"]] == [["support", "mailer"]]


def test_an_approval_asks_for_more_approvers_when_the_fleet_moved_under_a_require_rule(
        people, fleet):
    support, mailer = fleet
    actions.create_toxic_combination(actor=people.dana, **{**RULE, "effect":
                                                           "require_approvals"})
    mailer_off = propose(people, mailer, tools=["orders.lookup"]).version
    actions.approve_proposal(mailer_off.pk, actor=people.bob)
    pending = propose(people, support, delegates_to=["mailer"], **READER).version
    assert pending.required_approvals == 1
    mailer_on = propose(people, mailer, **MAILER).version
    actions.approve_proposal(mailer_on.pk, actor=people.bob)
    actions.approve_proposal(pending.pk, actor=people.bob)  # one approval was enough, no more
    pending.refresh_from_db()
    assert (pending.state, pending.required_approvals) == ("pending", 2)
    assert any(r.get("path") for r in pending.guardrail_results)
    assert AuditEntry.objects.filter(action="proposal.reevaluated",
                                     target=f"proposal:{pending.pk}").exists()
    actions.approve_proposal(pending.pk, actor=people.carol)
    pending.refresh_from_db()
    assert pending.state == "approved"
