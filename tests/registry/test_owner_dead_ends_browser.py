"""Alice, an owner, is never left at a dead end: she asks for a waiver from her agent's
finding (an approver grants it from the inbox), issues her own agent's token (its key shown
once), says why she rolls back, and follows her proposals in one list, where "changes
requested" is her turn, not the approvers', until she revises it. In Chromium against the
real server."""

import pytest

from audit.models import AuditEntry
from registry import actions
from registry.choices import VersionState, WaiverState
from registry.models import ApiToken, DesiredStateVersion, Waiver, WaiverRequest
from tests.conftest import REFUND_AGENT_YAML, approved_agent
from tests.registry.test_inbox_queue import bad_deployment, proposal_by_alice
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser



def test_alice_asks_for_a_waiver_issues_a_token_rolls_back_with_a_reason_and_sees_her_turn(
        people, live_server_process, browser_ready):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    refund = approved_agent(people, "refund-agent")
    actions.approve_proposal(proposal_by_alice(refund, model="gpt-5").pk, actor=people.bob)
    drifted = bad_deployment(people)  # payouts-agent: open findings, one at /tools/crm.search
    browser_passwords()
    base = live_server_process.url
    with sync_playwright() as playwright:
        browser = Browser(playwright, base)
        alice = browser.page("alice")

        # A waiver for her agent's finding: asked from the finding itself.
        alice.goto(f"{base}/agents/payouts-agent/")
        row = alice.locator("table.findings tr", has_text="/tools/crm.search")
        row.get_by_text("Ask for a waiver", exact=True).click()
        row.get_by_label("Why allow it").fill("support pilot needs the CRM this week")
        row.get_by_label("Ticket").fill("CHG-42")
        row.get_by_label("For (30m").fill("7d")
        row.get_by_role("button", name="Ask for a waiver on /tools/crm.search").click()
        expect(alice.locator(".messages")).to_contain_text("Asked for a waiver on "
                                                           "/tools/crm.search")
        expect(alice.locator(".waiver-requests")).to_contain_text("waiting for an approver")

        # Her own agent's token, its key shown this once.
        alice.get_by_role("navigation", name="Main").get_by_role("link", name="Tokens").click()
        alice.select_option("#issue-agent", "refund-agent")
        alice.fill("#issue-name", "refund worker")
        alice.get_by_role("button", name="Issue token").click()
        key = alice.locator("#issued-key").inner_text().strip()
        assert len(key) > 30
        expect(alice.locator("table.tokens")).to_contain_text("agent refund-agent")
        outsider = browser.browser.new_context()
        answer = outsider.request.get(f"{base}/api/v1/agents/refund-agent/desired-state",
                                      headers={"Authorization": f"Token {key}"})
        assert answer.status == 200 and answer.json()["generation"] == 2
        alice.goto(f"{base}/tokens/")
        expect(alice.locator("main")).not_to_contain_text(key)

        # A rollback with her reason, which the approver reads.
        alice.goto(f"{base}/agents/refund-agent/")
        alice.fill("#rollback-reason-1", "gpt-5 answers refunds too slowly")
        alice.locator("#rollback-1").click()
        expect(alice.locator("main")).to_contain_text("gpt-5 answers refunds too slowly")
        rollback = DesiredStateVersion.objects.get(agent=refund, state=VersionState.PENDING)

        # Bob: the waiver request is in his inbox; he grants it. He sends the rollback back.
        bob = browser.page("bob")
        bob.goto(f"{base}/inbox/?kind=waiver")
        request_row = bob.locator("tr.inbox-item", has_text="payouts-agent")
        request_row.locator("summary").click()
        expect(request_row).to_contain_text("support pilot needs the CRM this week")
        request_row.get_by_role("button", name="Grant the waiver").click()
        expect(bob.locator(".messages")).to_contain_text("/tools/crm.search")
        bob.goto(f"{base}/proposals/{rollback.pk}/")
        expect(bob.locator("main")).to_contain_text("gpt-5 answers refunds too slowly")
        bob.fill("#thread-body", "Say which model instead, please")
        bob.get_by_role("button", name="Request changes").click()
        expect(bob.locator(".messages")).to_contain_text("Added to the review thread")
        bob.goto(f"{base}/inbox/?kind=proposal")
        expect(bob.locator(f"#item-proposal-{rollback.pk}")).to_have_count(0)

        # Alice's list: her turn. She revises; it is the approvers' turn again.
        alice.get_by_role("navigation", name="Main").get_by_role("link", name="Inbox").click()
        mine = alice.locator(f"#mine-{rollback.pk}")
        expect(mine).to_contain_text("changes requested: your turn")
        alice.goto(f"{base}/manifests/new?agent=refund-agent")
        alice.fill("#manifest", REFUND_AGENT_YAML.replace("model: gpt-4.1", "model: gpt-4.1-mini"))
        alice.fill("#reason", "back to the 4.1 family, the mini model")
        alice.get_by_role("button", name="Apply").click()
        alice.goto(f"{base}/inbox/")
        expect(mine).to_contain_text("waiting for approval")
        expect(mine).to_contain_text("revision 2")
        bob.goto(f"{base}/inbox/?kind=proposal")
        expect(bob.locator(f"#item-proposal-{rollback.pk}")).to_contain_text("refund-agent")
        browser.browser.close()
    asked = WaiverRequest.objects.get(agent=drifted)
    assert asked.state == VersionState.APPROVED and asked.requested_by == people.alice
    assert Waiver.objects.get(pk=asked.waiver_id).state == WaiverState.ACTIVE
    assert AuditEntry.objects.filter(action="waiver.requested", actor="alice").exists()
    assert ApiToken.objects.get(agent=refund, name="refund worker").user == people.alice
    assert browser.problems == []
