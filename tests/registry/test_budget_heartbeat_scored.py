"""Budgets and heartbeat are permission changes (issue 29 item 7): dropping the token and
cost budgets, raising them a million-fold or relaxing the heartbeat from 5 minutes to a day
read "No permission changes", risk 0, on the API and on the approver's page."""

import pytest

from registry.permission_diff import Risk, permission_diff, risk_score
from tests.conftest import approved_agent, refund_manifest

BUDGETS = [{"tokens": 100_000, "per": "1h"}, {"cost": 50, "per": "1d"}]


def propose(client, **spec) -> dict:
    answer = client.post("/api/v1/agents/refund-agent/proposals",
                         {"spec": refund_manifest(**spec).spec}, format="json")
    assert answer.status_code == 201, answer.json()
    return answer.json()


@pytest.fixture
def governed(people):
    return approved_agent(people, "refund-agent", budgets=BUDGETS, heartbeat="5m")


@pytest.mark.django_db
def test_dropping_the_budgets_is_widening_and_scored(api_as, governed, people, client):
    body = propose(api_as(people.alice), heartbeat="5m")
    budget_lines = [c for c in body["changes"] if c["area"] == "budgets"]
    assert sorted(c["risk"] for c in budget_lines) == ["widening", "widening"]
    assert body["risk"] == 40
    client.force_login(people.bob)
    page = client.get(f"/proposals/{body['proposal']}/").content.decode()
    assert "No permission changes" not in page and "budget" in page


@pytest.mark.django_db
def test_raising_the_budgets_a_million_fold_is_widening(api_as, governed, people):
    raised = [{"tokens": 100_000_000_000, "per": "1h"}, {"cost": 50_000_000, "per": "1d"}]
    body = propose(api_as(people.alice), budgets=raised, heartbeat="5m")
    assert [c["risk"] for c in body["changes"]] == ["widening", "widening"]
    assert body["risk"] == 40


@pytest.mark.django_db
def test_relaxing_or_dropping_the_heartbeat_is_widening(api_as, governed, people):
    alice = api_as(people.alice)
    relaxed = propose(alice, budgets=BUDGETS, heartbeat="1d")
    assert [(c["area"], c["risk"], c["before"], c["after"]) for c in relaxed["changes"]] == [
        ("heartbeat", "widening", "5m", "1d")]
    assert relaxed["risk"] == 5
    dropped = propose(alice, budgets=BUDGETS)
    assert [(c["area"], c["risk"]) for c in dropped["changes"]] == [("heartbeat", "widening")]


@pytest.mark.django_db
def test_tightening_budgets_and_heartbeat_narrows_and_scores_nothing(api_as, governed, people):
    tighter = [{"tokens": 10_000, "per": "1h"}, {"cost": 5, "per": "1d"},
               {"cost": 1, "per": "1h"}]
    body = propose(api_as(people.alice), budgets=tighter, heartbeat="1m")
    assert {c["risk"] for c in body["changes"]} == {"narrowing"}
    assert len(body["changes"]) == 4 and body["risk"] == 0


def test_pure_diff_names_each_budget_and_a_new_agent_is_neutral():
    old = refund_manifest(budgets=BUDGETS, heartbeat="5m").spec
    new = refund_manifest().spec
    changes = permission_diff(old, new)
    assert [(c.pointer, c.risk) for c in changes] == [
        ("/budgets/cost:1d", Risk.WIDENING), ("/budgets/tokens:1h", Risk.WIDENING),
        ("/heartbeat", Risk.WIDENING)]
    assert risk_score(changes) == 45
    fresh = permission_diff(None, old)
    assert {c.risk for c in fresh if c.area in ("budgets", "heartbeat")} == {Risk.NEUTRAL}
