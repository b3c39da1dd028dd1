"""Four eyes holds when the proposer hides behind an agent's token or the command line."""

import getpass

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from audit.models import AuditEntry
from registry.models import DesiredStateVersion
from tests.conftest import REFUND_AGENT_YAML

pytestmark = pytest.mark.django_db


def cli_agent_token(capsys, username: str, agent: str) -> APIClient:
    """A token printed by `manage.py api_token USER --agent NAME`, in an API client."""
    call_command("api_token", username, "--agent", agent)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {capsys.readouterr().out.strip()}")
    return client


def propose_more_refunds(client: APIClient, most: int = 50000) -> int:
    answer = client.post("/api/v1/agents/refund-agent/proposals", {"spec": {
        "framework": "langgraph", "connector": {"type": "sandbox"}, "model": "gpt-4.1",
        "tools": ["orders.lookup", "payments.refund"],
        "actions": {"payments.refund": {"approval_above": 5000, "max": most}}}},
        format="json")
    assert answer.status_code == 201, answer.content
    return answer.json()["proposal"]


def test_an_admin_cannot_approve_what_they_proposed_through_an_agent_token(
        people, refund_agent, api_as, client, capsys):
    borrowed = cli_agent_token(capsys, "admin", "refund-agent")
    proposal = propose_more_refunds(borrowed)

    api = api_as(people.admin).post(f"/api/v1/proposals/{proposal}/approve", {}, format="json")
    assert api.status_code == 403 and api.json()["error"]["code"] == "four_eyes"
    client.force_login(people.admin)
    page = client.get(f"/proposals/{proposal}/")
    assert "the agent made this with a token you hold" in page.content.decode()
    client.post(f"/proposals/{proposal}/approve", {"comment": "lgtm"})
    rejected = api_as(people.admin).post(f"/api/v1/proposals/{proposal}/reject",
                                         {"comment": "no"}, format="json")
    assert rejected.status_code == 403

    version = DesiredStateVersion.objects.get(pk=proposal)
    assert version.state == "pending" and not version.approvals.exists()
    shown = api_as(people.bob).get(f"/api/v1/proposals/{proposal}").json()
    assert shown["token_holder"] == "admin" and "held by admin" in shown["origin"]
    # Someone else still can.
    assert api_as(people.bob).post(f"/api/v1/proposals/{proposal}/approve", {},
                                   format="json").status_code == 200
    assert DesiredStateVersion.objects.get(pk=proposal).state == "approved"


def test_a_re_edit_through_another_holders_token_makes_that_holder_its_proposer(
        people, refund_agent, api_as, capsys):
    first = propose_more_refunds(cli_agent_token(capsys, "alice", "refund-agent"))
    second = propose_more_refunds(cli_agent_token(capsys, "admin", "refund-agent"), most=90000)
    assert first == second  # the agent's one pending proposal, re-edited
    answer = api_as(people.admin).post(f"/api/v1/proposals/{first}/approve", {},
                                       format="json")
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "four_eyes"


def test_apply_on_the_command_line_says_so_and_who_ran_it(people, tmp_path, api_as):
    manifest = tmp_path / "refund.yaml"
    manifest.write_text(REFUND_AGENT_YAML)
    call_command("apply", "-f", str(manifest))  # no --as: it acts as metadata.owner, alice
    (version,) = DesiredStateVersion.objects.all()
    shown = api_as(people.bob).get(f"/api/v1/proposals/{version.pk}").json()
    assert shown["proposed_by"] == "alice"
    assert "command line" in shown["origin"] and getpass.getuser() in shown["origin"]
    assert "no --as" in shown["origin"]
    rows = AuditEntry.objects.filter(action__in=["agent.registered", "proposal.created"])
    assert rows.count() == 2
    assert all("command line" in row.reason and getpass.getuser() in row.reason for row in rows)


def test_an_approver_cannot_sign_off_a_runtime_action_asked_through_their_agent_token(
        people, refund_agent, api_as, capsys):
    from reconciliation.models import Escalation

    borrowed = cli_agent_token(capsys, "admin", "refund-agent")
    asked = borrowed.post("/api/v1/agents/refund-agent/decisions",
                          {"action": "payments.refund", "amount": 900}, format="json").json()
    assert asked["outcome"] == "pending"
    escalation = Escalation.objects.get(decision_id=asked["id"])
    answer = api_as(people.admin).post(f"/api/v1/escalations/{escalation.pk}/resolve",
                                       {"resolution": "allow", "comment": "fine by me"},
                                       format="json")
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "four_eyes"
    assert borrowed.get(f"/api/v1/decisions/{asked['id']}").json()["status"] == "pending"
    assert api_as(people.bob).post(f"/api/v1/escalations/{escalation.pk}/resolve",
                                   {"resolution": "allow", "comment": "checked"},
                                   format="json").status_code == 200
