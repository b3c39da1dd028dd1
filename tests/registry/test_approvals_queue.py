"""/approvals/ shows each approver the queue they can act on, not the global one: a proposal
bob already approved (it needs two) stays in carol's queue only, a runtime decision carol
asked for in bob's only; the cards drawn and the inbox badge agree."""

import re

import pytest

from registry import actions as registry_actions
from registry.choices import VersionSource
from registry.models import DesiredStateVersion
from runtime import actions as runtime_actions
from tests.conftest import approved_agent, refund_manifest

pytestmark = pytest.mark.django_db


def cards(body: str) -> list[str]:
    return re.findall(r'<article class="card (proposal|escalation)" aria-labelledby="'
                      r'(?:proposal|esc)-(\d+)"', body)


def badge(body: str) -> int:
    return int(re.search(r'id="inbox-count"[^>]*>(\d+)<', body).group(1))


def test_each_approver_sees_the_queue_they_can_act_on(people, client, api_as):
    agent = approved_agent(people, "refund-agent")
    proposal = registry_actions.propose(agent, refund_manifest(model="gpt-5").spec,
                                        agent.active_version.metadata, actor=people.alice,
                                        source=VersionSource.API).version
    DesiredStateVersion.objects.filter(pk=proposal.pk).update(required_approvals=2)
    registry_actions.approve_proposal(proposal.pk, actor=people.bob)
    assert DesiredStateVersion.objects.get(pk=proposal.pk).state == "pending"
    decision = runtime_actions.request_decision(agent, {"action": "payments.refund", "amount": 800},
                                        actor=people.carol)

    def seen_by(user) -> tuple[list[tuple[str, str]], int, int]:
        client.force_login(user)
        body = client.get("/approvals/").content.decode()
        inbox = api_as(user).get("/api/v1/inbox").json()
        return cards(body), badge(body), len(inbox["items"])

    bob_cards, bob_badge, bob_inbox = seen_by(people.bob)
    carol_cards, carol_badge, carol_inbox = seen_by(people.carol)

    # bob has approved the proposal already; carol may not decide what she asked for.
    assert ("proposal", str(proposal.pk)) not in bob_cards
    assert ("proposal", str(proposal.pk)) in carol_cards
    assert [kind for kind, _ in bob_cards] == ["escalation"]
    assert [kind for kind, _ in carol_cards] == ["proposal"]
    assert decision.pk and len(bob_cards) == bob_badge == bob_inbox == 1
    assert len(carol_cards) == carol_badge == carol_inbox == 1


def test_one_bad_deployment_is_one_card_decided_once(people, client):
    from audit.models import AuditEntry
    from reconciliation.models import Escalation
    from tests.registry.test_inbox_queue import bad_deployment

    agent = bad_deployment(people)
    escalations = list(Escalation.objects.filter(agent=agent).order_by("pk"))
    assert len(escalations) == 3
    client.force_login(people.bob)
    body = client.get("/approvals/").content.decode()
    assert cards(body) == [("escalation", str(escalations[0].pk))] and badge(body) == 1
    assert "incident: 3 findings from one change" in body
    assert all(f"escalation #{e.pk})" in body for e in escalations[1:])
    audited = AuditEntry.objects.filter(action="escalation.resolved").count()
    response = client.post(f"/inbox/incidents/{escalations[0].pk}/resolve",
                           {"resolution": "revert", "comment": "bad deploy",
                            "next": "/approvals/"})
    assert response.status_code == 302 and response["Location"] == "/approvals/"
    assert set(Escalation.objects.filter(agent=agent).values_list("status", "resolution")) == {
        ("resolved", "revert")}
    assert AuditEntry.objects.filter(action="escalation.resolved").count() == audited + 3
    assert cards(client.get("/approvals/").content.decode()) == []
