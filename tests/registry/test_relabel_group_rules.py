"""A labels-only proposal that moves an agent across a group rule names the rule and needs
the rule's sign-offs (issue 29 item 6). A proposal took the refund agent out of a team rule
that needs two sign-offs by relabelling it; the proposal did not name the rule, one approver
approved it and the sign-offs were gone (the guardrail version of this was fixed)."""

import pytest

from registry.models import Agent, DesiredStateVersion
from runtime.actions.group_rules import create_group_rule
from tests.conftest import approved_agent, refund_manifest


@pytest.fixture
def team_rule(people):
    agent = approved_agent(people, "refund-agent")
    create_group_rule(actor=people.dana, name="payments-refunds", measure="amount",
                      limit=20000, per="1h", selector={"team": "payments"},
                      match={"kind": "action", "action": "payments.refund"},
                      required_approvals=2)
    return agent


def relabel(client, labels: dict) -> dict:
    answer = client.post("/api/v1/agents/refund-agent/proposals",
                         {"spec": refund_manifest().spec, "labels": labels}, format="json")
    assert answer.status_code == 201, answer.json()
    return answer.json()


@pytest.mark.django_db
def test_a_relabel_out_of_a_two_signoff_rule_names_it_and_needs_two(api_as, people, team_rule,
                                                                    client):
    assert team_rule.labels["team"] == "payments"
    body = relabel(api_as(people.alice), {**team_rule.labels, "team": "support"})
    named = [g for g in body["guardrails"] if g.get("group_rule") == "payments-refunds"]
    assert [(g["change"], g["required_approvals"]) for g in named] == [("leaves", 2)]
    assert body["required_approvals"] == 2
    client.force_login(people.bob)
    page = client.get(f"/proposals/{body['proposal']}/").content.decode()
    assert "group rule payments-refunds" in page and "leaves" in page
    # one approver is not enough; the second distinct approver activates it
    assert api_as(people.bob).post(f"/api/v1/proposals/{body['proposal']}/approve", {},
                                   format="json").status_code == 200
    assert DesiredStateVersion.objects.get(pk=body["proposal"]).state == "pending"
    assert Agent.objects.get(name="refund-agent").labels["team"] == "payments"
    assert api_as(people.carol).post(f"/api/v1/proposals/{body['proposal']}/approve", {},
                                     format="json").status_code == 200
    assert Agent.objects.get(name="refund-agent").labels["team"] == "support"


@pytest.mark.django_db
def test_removing_the_label_takes_it_out_and_is_named(api_as, people,
                                                     team_rule):
    labels = {k: v for k, v in team_rule.labels.items() if k != "team"}
    body = relabel(api_as(people.alice), labels)
    assert [g["group_rule"] for g in body["guardrails"] if g.get("group_rule")] == [
        "payments-refunds"]
    assert body["required_approvals"] == 2


@pytest.mark.django_db
def test_a_relabel_into_a_rule_names_it_and_an_unrelated_relabel_names_none(api_as, people,
                                                                            team_rule):
    create_group_rule(actor=people.dana, name="eu-reads", measure="events", limit=100,
                      per="1h", selector={"labels": {"region": "eu"}}, match={})
    alice = api_as(people.alice)
    joined = relabel(alice, {**team_rule.labels, "region": "eu"})
    assert [(g["group_rule"], g["change"]) for g in joined["guardrails"]
            if g.get("group_rule")] == [("eu-reads", "joins")]
    assert joined["required_approvals"] == 1  # a count-only rule needs no extra sign-off
    unrelated = relabel(alice, {**team_rule.labels, "cost-centre": "42"})
    assert [g for g in unrelated["guardrails"] if g.get("group_rule")] == []


@pytest.mark.django_db
def test_a_disabled_rule_is_not_named(api_as, people, team_rule):
    from runtime.models import GroupRule

    GroupRule.objects.filter(name="payments-refunds").update(enabled=False)
    body = relabel(api_as(people.alice), {**team_rule.labels, "team": "support"})
    assert [g for g in body["guardrails"] if g.get("group_rule")] == []
    assert body["required_approvals"] == 1
