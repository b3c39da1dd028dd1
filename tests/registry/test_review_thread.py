"""Alice's proposal reads like a pull request: her reason first, then each approver's comment,
requested changes, approvals and the decision, in order, for the people involved (page and
API); and its diff names the one tool she added, not three renamed positions."""

import re

import pytest

from audit.models import AuditEntry
from registry import actions
from registry.choices import Role
from registry.models import DesiredStateVersion
from tests.conftest import REFUND_AGENT_YAML, approved_agent, make_person

pytestmark = pytest.mark.django_db


def propose_from_the_editor(client, people, reason: str) -> DesiredStateVersion:
    """alice adds crm.search to refund-agent's tools in the web editor, saying why."""
    approved_agent(people, "refund-agent")
    text = REFUND_AGENT_YAML.replace("tools: [orders.lookup, payments.refund]",
                                     "tools: [crm.search, orders.lookup, payments.refund]")
    client.force_login(people.alice)
    response = client.post("/manifests/new", {"manifest": text, "reason": reason})
    assert response.status_code == 200
    return DesiredStateVersion.objects.get(agent__name="refund-agent", state="pending")


def verdicts(body: str) -> list[str]:
    return re.findall(r'class="thread-entry verdict-[\w_]+" data-verdict="([\w_]+)"', body)


def test_the_thread_shows_reason_comments_requested_changes_and_approval_in_order(
        people, client, api_as):
    version = propose_from_the_editor(client, people, "support needs to look up customers")
    assert version.comment == "support needs to look up customers"
    client.force_login(people.bob)
    client.post(f"/proposals/{version.pk}/comment",
                {"body": "Why search and not lookup?", "verdict": "comment"})
    client.post(f"/proposals/{version.pk}/comment",
                {"body": "Scope it to read-only first", "verdict": "request_changes"})
    client.force_login(people.alice)
    client.post(f"/proposals/{version.pk}/comment",
                {"body": "search is read-only", "verdict": "comment"})
    actions.approve_proposal(version.pk, actor=people.carol, comment="fine by me")

    body = client.get(f"/proposals/{version.pk}/").content.decode()
    assert verdicts(body) == ["proposed", "comment", "request_changes", "comment", "approve"]
    for said in ("support needs to look up customers", "Why search and not lookup?",
                 "Scope it to read-only first", "search is read-only", "fine by me"):
        assert said in body
    entries = api_as(people.dana).get(f"/api/v1/proposals/{version.pk}/thread").json()["entries"]
    assert [(e["author"], e["verdict"]) for e in entries] == [
        ("alice", "proposed"), ("bob", "comment"), ("bob", "request_changes"),
        ("alice", "comment"), ("carol", "approve")]
    assert AuditEntry.objects.filter(action="proposal.changes_requested",
                                     target=f"proposal:{version.pk}").count() == 1
    assert AuditEntry.objects.filter(action="proposal.commented").count() == 2


def test_the_diff_is_one_added_tool(people, client):
    version = propose_from_the_editor(client, people, "crm lookups")
    client.force_login(people.bob)
    body = client.get(f"/proposals/{version.pk}/").content.decode()
    diff = re.search(r'<ul class="diff">(.*?)</ul>', body, re.S).group(1)
    lines = re.findall(r'<li class="(\w+)">.*?<code>([^<]*)</code>', diff, re.S)
    assert lines == [("added", "/tools/crm.search")]


def test_only_the_people_involved_read_and_write_the_thread(people, client, api_as):
    version = propose_from_the_editor(client, people, "reason")
    oscar = make_person("oscar", Role.OWNER)
    stranger = api_as(oscar)
    assert stranger.get(f"/api/v1/proposals/{version.pk}/thread").status_code == 403
    assert stranger.post(f"/api/v1/proposals/{version.pk}/thread",
                         {"body": "hi"}, format="json").status_code == 403
    client.force_login(oscar)
    assert "Review thread" not in client.get(f"/proposals/{version.pk}/").content.decode()
    # the proposer comments but cannot request changes on her own proposal
    alice = api_as(people.alice)
    refused = alice.post(f"/api/v1/proposals/{version.pk}/thread",
                         {"body": "please", "verdict": "request_changes"}, format="json")
    assert refused.status_code == 403  # only an approver who may decide requests changes
    added = alice.post(f"/api/v1/proposals/{version.pk}/thread", {"body": "ping"},
                       format="json")
    assert added.status_code == 201 and added.json()["entries"][-1]["body"] == "ping"
    before = AuditEntry.objects.count()
    for bad in ({"body": ""}, {"body": "x" * 2001}, {"body": "x", "verdict": "lgtm"}, {}):
        answer = alice.post(f"/api/v1/proposals/{version.pk}/thread", bad, format="json")
        assert answer.status_code == 400 and "error" in answer.json(), bad
    assert AuditEntry.objects.count() == before
    assert api_as(people.bob).get("/api/v1/proposals/999999/thread").status_code == 404
    # no request-changes button for the proposer; one for an approver who may decide
    assert ">Request changes<" not in client.get(f"/proposals/{version.pk}/").content.decode()
    client.force_login(people.bob)
    assert ">Request changes<" in client.get(f"/proposals/{version.pk}/").content.decode()
