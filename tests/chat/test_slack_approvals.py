"""Approvals in Slack against a local stand-in for Slack's API: a pending proposal is posted
with its diff and buttons; a click is checked (signature, window, replay), mapped to the
linked person (never a display name) and goes through the console's own approve action, four
eyes and step-up included."""

import time

import pytest
from django.test import Client

from audit.models import AuditEntry
from chat import posting
from chat.models import ChatAccount
from reconciliation.models import Escalation
from registry import actions
from registry.choices import Role, VersionSource, VersionState
from registry.models import Approval, DesiredStateVersion
from runtime.models import Decision
from tests.chat.slack_standin import SlackStandIn
from tests.conftest import refund_manifest

BOB, ALICE, CAROL, EVE = "U0BOB", "U0ALICE", "U0CAROL", "U0EVE"


@pytest.fixture
def slack(settings, redis_client):
    stand_in = SlackStandIn()
    settings.SLACK_SIGNING_SECRET = stand_in.secret
    settings.SLACK_WEBHOOK_URL = stand_in.webhook_url
    settings.SLACK_ALLOWED_HOSTS = ["127.0.0.1:*"]
    yield stand_in
    stand_in.close()


@pytest.fixture
def proposal(people, refund_agent) -> DesiredStateVersion:
    """alice proposes that the refund agent may also send email."""
    (outcome,) = actions.apply_manifests(
        [refund_manifest(tools=["orders.lookup", "payments.refund", "email.send"])],
        actor=people.alice, source=VersionSource.YAML)
    return outcome.version


def send(slack: SlackStandIn, path: str, body: bytes, **signing) -> dict:
    response = Client().post(path, data=body, content_type="application/x-www-form-urlencoded",
                             headers=slack.signed(body, **signing))
    return {"status": response.status_code, **response.json()}


def link(slack: SlackStandIn, api_as, user, slack_user: str) -> None:
    code = api_as(user).post("/api/v1/chat/link-codes").json()["code"]
    answer = send(slack, "/chat/slack/commands", slack.command_body(slack_user, f"link {code}"))
    assert answer["text"] == f"Linked: your clicks now act as {user.username}."


def click(slack: SlackStandIn, user: str, action: str, version, n: int = 1, **kw) -> dict:
    return send(slack, "/chat/slack/interactions",
                slack.click_body(user, action, f"proposal:{version.pk}", n, **kw))


def test_a_proposal_is_posted_with_its_diff_and_buttons_once(slack, proposal):
    assert posting.post_pending() == 1
    assert posting.post_pending() == 0  # posted once
    (message,) = slack.webhook_posts
    text = "\n".join(b["text"]["text"] for b in message["blocks"] if b["type"] == "section")
    assert f"Proposal #{proposal.pk} for *refund-agent* by alice" in text
    assert "email.send" in text
    buttons = next(b for b in message["blocks"] if b["type"] == "actions")["elements"]
    assert [(b["action_id"], b.get("value")) for b in buttons] == [
        ("approve", f"proposal:{proposal.pk}"), ("reject", f"proposal:{proposal.pk}"),
        ("open", None)]
    assert buttons[2]["url"].endswith(f"/proposals/{proposal.pk}/")
    assert slack.problems == []


def test_a_linked_approver_approves_from_slack_as_in_the_console(slack, proposal, people,
                                                                 api_as):
    link(slack, api_as, people.bob, BOB)
    answer = click(slack, BOB, "approve", proposal)
    assert answer["status"] == 200 and answer["done"], answer
    proposal.refresh_from_db()
    assert proposal.state == VersionState.APPROVED
    assert Approval.objects.get(version=proposal).approver == people.bob
    entry = AuditEntry.objects.filter(action="proposal.approved").latest("seq")
    assert entry.actor == "bob"
    assert slack.responses[-1]["replace_original"] is True
    assert f"Proposal #{proposal.pk} approved" in slack.responses[-1]["text"]
    assert AuditEntry.objects.filter(action="chat.account_linked", actor="bob").exists()


def test_a_forged_click_is_refused(slack, proposal, people, api_as):
    link(slack, api_as, people.bob, BOB)
    answer = send(slack, "/chat/slack/interactions",
                  slack.click_body(BOB, "approve", f"proposal:{proposal.pk}"),
                  secret="not-the-signing-secret-at-all-00")
    assert answer["status"] == 401 and answer["error"]["code"] == "bad_signature"
    body = slack.click_body(BOB, "approve", f"proposal:{proposal.pk}")
    unsigned = Client().post("/chat/slack/interactions", data=body,
                             content_type="application/x-www-form-urlencoded")
    assert unsigned.status_code == 401
    tampered = slack.signed(body)
    other = slack.click_body(BOB, "reject", f"proposal:{proposal.pk}")
    response = Client().post("/chat/slack/interactions", data=other, headers=tampered,
                             content_type="application/x-www-form-urlencoded")
    assert response.status_code == 401  # a signature over another body
    proposal.refresh_from_db()
    assert proposal.state == VersionState.PENDING


def test_a_replay_outside_the_window_or_twice_is_refused(slack, proposal, people, api_as):
    link(slack, api_as, people.bob, BOB)
    stale = send(slack, "/chat/slack/interactions",
                 slack.click_body(BOB, "approve", f"proposal:{proposal.pk}"),
                 at=time.time() - 301)
    assert stale["status"] == 401 and "window" in stale["error"]["message"]
    ahead = send(slack, "/chat/slack/interactions",
                 slack.click_body(BOB, "approve", f"proposal:{proposal.pk}"),
                 at=time.time() + 301)
    assert ahead["status"] == 401
    proposal.refresh_from_db()
    assert proposal.state == VersionState.PENDING
    body = slack.click_body(BOB, "reject", f"proposal:{proposal.pk}")
    headers = slack.signed(body)
    first = Client().post("/chat/slack/interactions", data=body, headers=headers,
                          content_type="application/x-www-form-urlencoded")
    again = Client().post("/chat/slack/interactions", data=body, headers=headers,
                          content_type="application/x-www-form-urlencoded")
    assert first.status_code == 200 and again.status_code == 401


def test_self_approval_is_refused_by_four_eyes(slack, proposal, people, api_as):
    actions.grant_role(people.alice, Role.APPROVER, actor="system:test")  # she may approve,
    link(slack, api_as, people.alice, ALICE)  # but never her own proposal
    answer = click(slack, ALICE, "approve", proposal)
    assert answer["status"] == 200 and not answer["done"]
    assert answer["code"] == "four_eyes" and "Four eyes" in answer["text"]
    assert slack.responses[-1]["response_type"] == "ephemeral"
    proposal.refresh_from_db()
    assert proposal.state == VersionState.PENDING and not Approval.objects.filter(
        version=proposal).exists()


def test_an_unlinked_user_is_refused_whatever_their_name(slack, proposal, people, api_as):
    link(slack, api_as, people.bob, BOB)
    answer = click(slack, EVE, "approve", proposal, name="bob")
    assert not answer["done"] and answer["code"] == "not_linked"
    proposal.refresh_from_db()
    assert proposal.state == VersionState.PENDING


def test_step_up_sends_the_approver_to_the_console(slack, proposal, people, api_as, settings):
    settings.STEPUP_RISK_THRESHOLD = 0
    link(slack, api_as, people.carol, CAROL)
    answer = click(slack, CAROL, "approve", proposal)
    assert not answer["done"] and answer["code"] == "step_up_required"
    assert "open the console to approve this one" in answer["text"]
    assert answer["text"].endswith(f"/proposals/{proposal.pk}/")
    proposal.refresh_from_db()
    assert proposal.state == VersionState.PENDING


def test_a_link_code_works_once_and_links_by_slack_ids(slack, people, api_as):
    code = api_as(people.bob).post("/api/v1/chat/link-codes").json()["code"]
    first = send(slack, "/chat/slack/commands", slack.command_body(BOB, f"link {code}"))
    again = send(slack, "/chat/slack/commands", slack.command_body(EVE, f"link {code}"))
    assert first["text"].startswith("Linked") and "not valid" in again["text"]
    account = ChatAccount.objects.get()
    assert (account.user, account.workspace, account.external_id) == (people.bob, slack.team,
                                                                      BOB)
    bob = api_as(people.bob)
    assert bob.get("/api/v1/chat/accounts").json()["accounts"][0]["external_id"] == BOB
    assert api_as(people.carol).delete(f"/api/v1/chat/accounts/{account.pk}").status_code == 404
    assert bob.delete(f"/api/v1/chat/accounts/{account.pk}").status_code == 204
    assert not ChatAccount.objects.exists()


def test_a_pending_decision_is_posted_and_allowed_from_slack(slack, people, api_as,
                                                             agent_client):
    asked = agent_client.post("/api/v1/agents/refund-agent/decisions",
                              {"action": "payments.refund", "amount": 700}, format="json").json()
    escalation = Escalation.objects.get(decision_id=asked["id"])
    assert posting.post_pending() == 1
    message = slack.webhook_posts[-1]
    assert "Pending decision: payments.refund of 700" in message["blocks"][0]["text"]["text"]
    buttons = message["blocks"][1]["elements"]
    assert [b["action_id"] for b in buttons] == ["allow", "deny", "open"]
    actions.grant_role(people.alice, Role.APPROVER, actor="system:test")
    link(slack, api_as, people.alice, ALICE)
    link(slack, api_as, people.bob, BOB)
    value = f"escalation:{escalation.pk}"
    own = send(slack, "/chat/slack/interactions", slack.click_body(ALICE, "allow", value, 1))
    assert not own["done"] and own["code"] == "four_eyes"  # her own agent's action
    assert Decision.objects.get(pk=asked["id"]).status == "pending"
    allowed = send(slack, "/chat/slack/interactions", slack.click_body(BOB, "allow", value, 2))
    assert allowed["done"], allowed
    assert Decision.objects.get(pk=asked["id"]).status == "approved"
    assert AuditEntry.objects.filter(action__in=["escalation.resolved", "decision.decided"],
                                     actor="bob").exists()
