"""Group rules through the API: compliance manages them (audited), nobody else can; a bad
rule is a 422 naming its field; the what-if replays the fleet's last week with exact counts."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from audit.models import AuditEntry
from runtime import actions
from runtime.models import GroupRule
from tests.conftest import approved_agent, token_client

SPEC = {"data": [{"resource": "customers_db", "access": "read"},
                 {"resource": "payments", "access": "write"}],
        "limits": [], "actions": {"payments.refund": {"max": 50000}}}
REFUNDS = {"name": "payments-refunds", "selector": {"team": "payments"},
           "match": {"kind": "action", "action": "payments.refund"}, "measure": "amount",
           "limit": 20000, "per": "1h"}
READS = {"name": "one-customer", "match": {"kind": "data_access", "resource": "customers_db"},
         "measure": "events", "limit": 50, "per": "1h", "per_record": True}


def entries(action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action))


@pytest.mark.django_db
def test_compliance_creates_changes_and_deletes_a_group_rule_each_audited(people, api_as):
    dana = api_as(people.dana)
    response = dana.post("/api/v1/group-rules", REFUNDS, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["revision"] == 1 and response.json()["created_by"] == "dana"
    listed = dana.get("/api/v1/group-rules").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["name"] for row in rows] == ["payments-refunds"]
    changed = dana.patch("/api/v1/group-rules/payments-refunds", {"limit": 30000},
                         format="json")
    assert changed.status_code == 200 and changed.json()["revision"] == 2  # fresh windows
    described = dana.patch("/api/v1/group-rules/payments-refunds", {"description": "why"},
                           format="json")
    assert described.json()["revision"] == 2  # words alone do not restart the count
    assert dana.delete("/api/v1/group-rules/payments-refunds").status_code == 204
    assert not GroupRule.objects.exists()
    (created,) = entries("group_rule.created")
    assert created.actor == "dana" and created.after["limit"] == 20000
    first, second = entries("group_rule.updated")
    assert (first.before["limit"], first.after["limit"]) == (20000, 30000)
    (deleted,) = entries("group_rule.deleted")
    assert deleted.before["name"] == "payments-refunds"


@pytest.mark.django_db
def test_only_compliance_writes_group_rules_and_an_agent_token_reads_nothing(people, api_as):
    agent = approved_agent(people, "refund-a", **SPEC)
    for user in (people.alice, people.bob):  # (an admin holds every role)
        assert api_as(user).post("/api/v1/group-rules", REFUNDS,
                                 format="json").status_code == 403
    actions_ = api_as(people.dana)
    actions_.post("/api/v1/group-rules", REFUNDS, format="json")
    assert api_as(people.alice).get("/api/v1/group-rules").status_code == 200
    assert api_as(people.bob).delete("/api/v1/group-rules/payments-refunds").status_code == 403
    assert api_as(people.alice).patch("/api/v1/group-rules/payments-refunds", {"limit": 1},
                                      format="json").status_code == 403
    agent_client = token_client(people, agent)
    assert agent_client.get("/api/v1/group-rules").status_code == 403
    assert agent_client.post("/api/v1/group-rules/what-if", READS,
                             format="json").status_code == 403
    assert api_as(people.alice).post("/api/v1/group-rules/what-if", READS,
                                     format="json").status_code == 403
    assert GroupRule.objects.get().limit == 20000
    assert len(entries("group_rule.created")) == 1


@pytest.mark.django_db
def test_a_bad_rule_is_a_422_naming_each_field_and_nothing_is_saved(people, api_as):
    dana = api_as(people.dana)
    response = dana.post("/api/v1/group-rules", {**REFUNDS, "per": "1y", "limit": -5,
                                                 "selector": {"colour": "red"}}, format="json")
    assert response.status_code == 422
    assert [d["pointer"] for d in response.json()["error"]["details"]] == [
        "/selector/colour", "/limit", "/per"]
    assert dana.post("/api/v1/group-rules", {**REFUNDS, "measure": "bytes"},
                     format="json").status_code == 400
    assert dana.post("/api/v1/group-rules/what-if", [1, 2], format="json").status_code == 422
    assert dana.post("/api/v1/group-rules/what-if", {"measure": "events"},
                     format="json").status_code == 422
    dana.post("/api/v1/group-rules", REFUNDS, format="json")
    again = dana.post("/api/v1/group-rules", REFUNDS, format="json")
    assert again.status_code == 400 and "/name" in str(again.json())
    assert dana.patch("/api/v1/group-rules/payments-refunds", {"per": "nope"},
                      format="json").status_code == 422
    assert GroupRule.objects.get().per == "1h"
    assert not entries("group_rule.updated")


def _events(agent_name: str, count: int, start: datetime, **fields) -> list[dict]:
    return [{"id": uuid.uuid4().hex, "agent": agent_name,
             "ts": (start + timedelta(seconds=index)).isoformat(), **fields}
            for index in range(count)]


@pytest.mark.django_db
def test_what_if_counts_the_breaches_findings_and_agents_a_rule_would_have_flagged(
        people, api_as):
    for name in ("pay-a", "pay-b"):
        approved_agent(people, name, **SPEC)
    support = approved_agent(people, "support", **SPEC)
    from registry.models import Agent

    Agent.objects.filter(pk=support.pk).update(labels={"team": "support"})
    now = datetime.now(UTC)
    days_ago = now - timedelta(days=3)
    read = {"kind": "data_access", "resource": "customers_db", "record": "c-42"}
    refund = {"kind": "action", "action": "payments.refund"}
    items = (
        # Three days ago: 60 reads of c-42 by three agents within a minute (one breach), and
        # 50 of c-7 (not above 50).
        _events("pay-a", 20, days_ago, **read) + _events("pay-b", 20, days_ago, **read)
        + _events("support", 20, days_ago, **read)
        + _events("pay-a", 50, days_ago, **{**read, "record": "c-7"})
        # Refunds: 2 x 11,000 by the payments team an hour ago (one breach), support's
        # 30,000 does not count; ten days ago is outside the week.
        + _events("pay-a", 1, now - timedelta(hours=1), amount=11000, **refund)
        + _events("pay-b", 1, now - timedelta(minutes=50), amount=11000, **refund)
        + _events("support", 1, now - timedelta(minutes=40), amount=30000, **refund)
        + _events("pay-a", 1, now - timedelta(days=10), amount=30000, **refund))
    report = actions.ingest_events(items, actor=people.admin,
                                   now=now)
    assert report.to_dict()["accepted"] == len(items)
    dana = api_as(people.dana)
    reads = dana.post("/api/v1/group-rules/what-if", READS, format="json").json()
    assert (reads["events"], reads["breaches"], reads["escalations"], reads["findings"]) == (
        113, 1, 1, 3)  # every event of the agents it covers in the week is replayed
    assert reads["agents"] == [{"agent": "pay-a", "findings": 1},
                               {"agent": "pay-b", "findings": 1},
                               {"agent": "support", "findings": 1}]
    (example,) = reads["examples"]
    assert (example["group"], example["total"], example["events_over"]) == (
        "record:customers_db:c-42", 60, 10)  # its peak
    refunds = dana.post("/api/v1/group-rules/what-if", {**REFUNDS, "effect": "log"},
                        format="json").json()
    assert refunds["agents_covered"] == ["pay-a", "pay-b"]
    assert (refunds["events"], refunds["breaches"], refunds["escalations"],
            refunds["findings"]) == (92, 1, 0, 2)
    assert refunds["examples"][0]["total"] == 22000
    dana.post("/api/v1/group-rules", {**REFUNDS, "limit": 25000}, format="json")
    saved = dana.get("/api/v1/group-rules/payments-refunds/what-if").json()
    assert (saved["breaches"], saved["findings"]) == (0, 0)
    assert dana.get("/api/v1/group-rules/nothing/what-if").status_code == 404


@pytest.mark.django_db
def test_what_if_pages_through_the_week_and_says_when_it_stopped(people, api_as, settings,
                                                                 monkeypatch):
    from runtime import whatif

    monkeypatch.setattr(whatif, "PAGE", 7)
    settings.WHATIF_MAX_EVENTS = 30
    approved_agent(people, "pay-a", **SPEC)
    start = datetime.now(UTC) - timedelta(hours=2)
    same_ts = [{"id": f"same-{i}", "agent": "pay-a", "ts": start.isoformat(),
                "kind": "data_access", "resource": "customers_db", "record": "c-1"}
               for i in range(10)]  # one timestamp across page edges
    actions.ingest_events(same_ts + _events("pay-a", 40, start, kind="data_access",
                                            resource="customers_db", record="c-1"),
                          actor=people.admin)
    result = api_as(people.dana).post("/api/v1/group-rules/what-if",
                                      {**READS, "limit": 25}, format="json").json()
    assert (result["events"], result["capped"], result["breaches"]) == (30, True, 1)
    settings.WHATIF_MAX_EVENTS = 1000
    result = api_as(people.dana).post("/api/v1/group-rules/what-if",
                                      {**READS, "limit": 25}, format="json").json()
    assert (result["events"], result["capped"]) == (50, False)  # none read twice
    assert result["examples"][0]["events_over"] == 25


@pytest.mark.django_db
def test_the_rule_pages_show_breaches_to_reviewers_and_the_what_if_to_compliance(people,
                                                                                 client):
    from runtime.actions.group_rules import create_group_rule
    from runtime.models import GroupBreach

    rule = create_group_rule(actor=people.dana, name="one-customer", measure="events",
                             limit=50, per="1h", per_record=True,
                             match={"kind": "data_access", "resource": "customers_db"})
    GroupBreach.objects.create(rule=rule, group_key="record:customers_db:c-42", window="w",
                               total=51, agents=["secret-agent", "pay-a"])
    assert client.get("/group-rules/").status_code == 302  # signed-in people only
    client.force_login(people.alice)
    listing = client.get("/group-rules/").content.decode()
    assert "one-customer" in listing and "Breaches" not in listing
    page = client.get("/group-rules/one-customer/").content.decode()
    assert "secret-agent" not in page and "What-if" not in page  # an owner: the rule only
    client.force_login(people.dana)
    page = client.get("/group-rules/one-customer/").content.decode()
    assert "secret-agent, pay-a" in page
    assert "What-if: the last 7 days of the fleet" in page and "<strong>0</strong> breaches" in page
    client.force_login(people.bob)
    page = client.get("/group-rules/one-customer/").content.decode()
    assert "secret-agent" in page and "What-if" not in page
    assert client.get("/group-rules/nothing/").status_code == 404
