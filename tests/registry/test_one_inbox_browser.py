"""Bob has one queue: the inbox holds proposals, incidents, proposed retirements and shadow
requests, filtered by kind, agent and team; the nav's Approvals and Escalations are the inbox
filtered; a proposal approved in place shows what it changes above the approve button, and
four eyes and step-up are as strict there as anywhere. In Chromium against the real server."""

import pytest
from django.contrib.auth.models import User

from reconciliation import actions as reconciliation_actions
from reconciliation.models import AgentStatus
from registry import actions
from registry.choices import Lifecycle, Role, VersionSource, VersionState
from registry.models import Agent, DesiredStateVersion
from tests.conftest import approved_agent, refund_manifest, start_daphne, stop_daphne
from tests.registry.test_inbox_queue import bad_deployment
from tests.registry.test_stepup import enrol, raise_limit, totp
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser


def agent_of(people, name: str, *, team: str, owner: str = "alice", approve: bool = True):
    """An agent like the refund agent labelled with `team`, registered by its owner (and
    approved by carol, unless `approve` is false: then its registration waits)."""
    manifest = refund_manifest()
    object.__setattr__(manifest, "name", name)
    object.__setattr__(manifest, "owner", owner)
    object.__setattr__(manifest, "labels", {"team": team, "env": "prod"})
    (outcome,) = actions.apply_manifests([manifest], actor=User.objects.get(username=owner),
                                         source=VersionSource.YAML)
    if approve:
        actions.approve_proposal(outcome.version.pk, actor=people.carol)
    return outcome.version


@pytest.fixture
def server(transactional_db, monkeypatch):
    """The live server with a step-up threshold (risk above 15 needs a fresh code)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    live = start_daphne(STEPUP_RISK_THRESHOLD="15")
    yield live
    stop_daphne(live)


def test_bob_decides_proposals_incidents_retirements_and_shadow_requests_from_one_inbox(
        people, server):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    refund = approved_agent(people, "refund-agent")  # team payments
    bad_deployment(people)  # payouts-agent: three drifts from one deployment, one incident
    agent_of(people, "old-agent", team="support")
    actions.propose_retirement("old-agent", actor=people.alice, reason="replaced by refund-agent")
    reconciliation_actions.set_shadow(actor=people.alice, agent=refund, enabled=True,
                                      duration="1d", reason="migrating the refund flow")
    raised = raise_limit(people, refund)  # the refund limit raised: risk over the threshold
    actions.grant_role(people.bob, Role.OWNER, actor="system:test")
    bobs = agent_of(people, "bobs-agent", team="support", owner="bob", approve=False)
    secret = enrol(people.bob)
    browser_passwords()
    base = server.url
    with sync_playwright() as playwright:
        browser = Browser(playwright, base)
        bob = browser.page("bob")
        rows = bob.locator("tr.inbox-item")

        # The nav's Approvals is the inbox's proposals: not bob's own registration.
        bob.get_by_role("navigation", name="Main").get_by_role("link", name="Approvals").click()
        bob.wait_for_url(f"{base}/inbox/?kind=proposal")
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-kind", "proposal")
        expect(rows.first).to_contain_text("refund-agent")
        expect(bob.locator("table.inbox-queue")).not_to_contain_text("bobs-agent")

        # The nav's Escalations is the inbox's escalations: the bad deployment, one line.
        bob.get_by_role("navigation", name="Main").get_by_role(
            "link", name="Escalations").click()
        bob.wait_for_url(f"{base}/inbox/?kind=escalation")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("payouts-agent")
        expect(rows.first).to_contain_text("3 findings")

        # All of it in one queue, the retirement and the shadow request too.
        bob.get_by_role("navigation", name="Kinds").get_by_role("link", name="All").click()
        expect(rows).to_have_count(4)
        kinds = {rows.nth(i).get_attribute("data-kind") for i in range(4)}
        assert kinds == {"proposal", "incident", "retirement", "shadow"}
        # Filtered by team: support's is the retirement (bob's own agent is not his to decide).
        bob.select_option("#filter-team", "support")
        bob.get_by_role("button", name="Filter").click()
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-kind", "retirement")
        expect(rows.first).to_contain_text("old-agent")
        # ...and by agent.
        bob.goto(f"{base}/inbox/")
        bob.select_option("#filter-agent", "refund-agent")
        bob.get_by_role("button", name="Filter").click()
        expect(rows).to_have_count(2)
        assert {rows.nth(i).get_attribute("data-kind") for i in range(2)} == {
            "proposal", "shadow"}

        # Approving in place: what the proposal changes is in view above the button.
        proposal = bob.locator(f"#item-proposal-{raised.pk}")
        proposal.locator("summary").click()
        changes = proposal.locator("ul.changes li")
        expect(changes.first).to_be_visible()
        expect(proposal.locator("ul.changes")).to_contain_text("payments.refund")
        expect(proposal.locator("ul.diff")).to_contain_text("/actions/payments.refund")
        expect(proposal).to_contain_text("Step-up")
        approve = proposal.get_by_role("button", name=f"Approve #{raised.pk}")
        assert changes.first.bounding_box()["y"] < approve.bounding_box()["y"]
        approve.click()  # no code: refused, as on the proposal's own page
        expect(bob.locator(".messages")).to_contain_text("step-up")
        assert DesiredStateVersion.objects.get(pk=raised.pk).state == VersionState.PENDING
        proposal = bob.locator(f"#item-proposal-{raised.pk}")
        proposal.locator("summary").click()
        proposal.locator(f"#approve-otp-{raised.pk}").fill(totp(secret))
        proposal.get_by_role("button", name=f"Approve #{raised.pk}").click()
        expect(bob.locator(".messages")).to_contain_text(f"Approved proposal #{raised.pk}")
        assert bob.url.startswith(f"{base}/inbox/")

        # The shadow request and the retirement, decided in place too.
        bob.goto(f"{base}/inbox/?kind=shadow")
        rows.first.locator("summary").click()
        expect(rows.first).to_contain_text("migrating the refund flow")
        rows.first.get_by_role("button", name="Approve shadow mode").click()
        expect(bob.locator(".messages")).to_contain_text("Shadow mode for refund-agent")
        bob.goto(f"{base}/inbox/?kind=retirement")
        rows.first.locator("summary").click()
        expect(rows.first).to_contain_text("replaced by refund-agent")
        rows.first.get_by_role("button", name="Retire old-agent").click()
        expect(bob.locator(".messages")).to_contain_text("Retired old-agent")
        bob.goto(f"{base}/inbox/")
        expect(rows).to_have_count(1)  # the incident is left
        expect(rows.first).to_have_attribute("data-kind", "incident")

        # Four eyes: bob's own registration is carol's to decide, never his.
        bob.goto(f"{base}/proposals/{bobs.pk}/")
        expect(bob.locator("main")).to_contain_text("Four eyes: you made this proposal")
        expect(bob.get_by_role("button", name=f"Approve #{bobs.pk}")).to_have_count(0)
        carol = browser.page("carol")
        carol.goto(f"{base}/inbox/?kind=proposal")
        expect(carol.locator(f"#item-proposal-{bobs.pk}")).to_contain_text("bobs-agent")
        browser.browser.close()
    assert AgentStatus.objects.get(agent=refund).shadow
    assert Agent.objects.get(name="old-agent").lifecycle == Lifecycle.RETIRED
    assert DesiredStateVersion.objects.get(pk=bobs.pk).state == VersionState.PENDING
    assert browser.problems == []
