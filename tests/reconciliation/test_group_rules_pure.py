"""Group rules as pure functions: selection by label, owner, team and framework; what counts
and how much; the window an event lands in; and the replay the what-if runs, with exact
expectations."""

from datetime import UTC, datetime, timedelta

import pytest

from runtime.events import Event
from runtime.group_rules import (
    AgentFacts,
    GroupRuleSpec,
    checks,
    describe,
    replay,
    selects,
    validate,
    weight,
)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PAY1 = AgentFacts(1, "refund-a", "alice", {"team": "payments", "env": "prod"}, "langgraph")
PAY2 = AgentFacts(2, "refund-b", "erin", {"team": "payments"}, "crewai")
SUPPORT = AgentFacts(3, "support", "alice", {"team": "support"}, "langgraph")

REFUNDS = GroupRuleSpec(1, "payments-refunds", {"team": "payments"},
                        {"kind": "action", "action": "payments.refund"}, "amount", 20000, "1h")
READS = GroupRuleSpec(2, "one-customer", {}, {"kind": "data_access", "resource": "customers_db"},
                      "events", 50, "1h", per_record=True)


def refund(event_id: str, amount: float, minutes: float) -> Event:
    return Event(id=event_id, agent="", ts=T0 + timedelta(minutes=minutes), kind="action",
                 action="payments.refund", amount=amount)


def read(event_id: str, record: str, minutes: float) -> Event:
    return Event(id=event_id, agent="", ts=T0 + timedelta(minutes=minutes), kind="data_access",
                 resource="customers_db", record=record)


@pytest.mark.parametrize("selector, chosen", [
    ({}, {"refund-a", "refund-b", "support"}),
    ({"team": "payments"}, {"refund-a", "refund-b"}),
    ({"labels": {"env": "prod"}}, {"refund-a"}),
    ({"owner": "alice"}, {"refund-a", "support"}),
    ({"framework": "langgraph"}, {"refund-a", "support"}),
    ({"owner": "alice", "team": "payments"}, {"refund-a"}),
    ({"team": "nobody"}, set()),
])
def test_a_selector_chooses_agents_by_label_owner_team_and_framework(selector, chosen):
    rule = GroupRuleSpec(9, "r", selector, {}, "events", 1, "1h")
    assert {a.name for a in (PAY1, PAY2, SUPPORT) if selects(rule, a)} == chosen


def test_what_an_event_weighs_in_each_measure():
    assert weight(REFUNDS, refund("e", 1200.5, 0)) == 1200.5
    assert weight(REFUNDS, read("e", "c1", 0)) is None  # not a refund
    assert weight(READS, read("e", "c1", 0)) == 1.0
    assert weight(READS, Event(id="e", agent="", ts=T0, kind="data_access",
                               resource="customers_db")) is None  # no record: no window
    tokens = GroupRuleSpec(3, "tokens", {}, {}, "tokens", 10, "1h")
    assert weight(tokens, read("e", "c1", 0)) is None


def test_each_record_has_its_own_window_across_agents_and_a_new_revision_starts_afresh():
    (a,) = checks([READS], PAY1, read("e1", "c-42", 0))
    (b,) = checks([READS], SUPPORT, read("e2", "c-42", 0))
    (c,) = checks([READS], SUPPORT, read("e3", "c-7", 0))
    assert a.key == b.key != c.key
    assert (a.member, b.member) == ("1|e1|1.0", "3|e2|1.0")
    revised = GroupRuleSpec(**{**READS.__dict__, "revision": 2})
    assert checks([revised], PAY1, read("e1", "c-42", 0))[0].key != a.key
    assert checks([REFUNDS], SUPPORT, refund("e4", 100, 0)) == []  # not in the team


def test_refunds_across_the_team_over_20000_an_hour_are_one_breach_naming_both_agents():
    events = [(PAY1, refund("r1", 9000, 0)), (PAY2, refund("r2", 9000, 10)),
              (SUPPORT, refund("s1", 50000, 15)),  # another team: not counted
              (PAY1, refund("r3", 2000, 20)),  # exactly 20,000: not above
              (PAY2, refund("r4", 1, 30)),  # 20,001: the breach
              (PAY1, refund("r5", 500, 40)),  # the same window still over: same breach
              (PAY1, refund("r6", 100, 200))]  # hours later: the window emptied
    (breach,) = replay(REFUNDS, events)
    assert (breach.first_event, breach.total, breach.agents, breach.events) == (
        "r4", 20501, ["refund-a", "refund-b"], 2)
    assert describe(REFUNDS, breach.group_key, 20001) == (
        "group rule payments-refunds: 20,001 in amounts across the group per 1h, above 20,000")


def test_51_reads_of_one_record_by_three_agents_is_one_breach_whatever_the_interleaving():
    agents = [PAY1, PAY2, SUPPORT]
    events = [(agents[i % 3], read(f"e{i}", "c-42", i)) for i in range(51)]
    events += [(PAY1, read(f"x{i}", "c-7", i)) for i in range(50)]  # another record, at 50
    events.sort(key=lambda pair: pair[1].ts)
    (breach,) = replay(READS, events)
    assert (breach.group_key, breach.first_event, breach.total) == (
        "record:customers_db:c-42", "e50", 51)
    assert breach.agents == ["refund-a", "refund-b", "support"]
    # Reads spread so no hour holds 51: nothing.
    sparse = [(PAY1, read(f"s{i}", "c-1", i * 2)) for i in range(60)]
    assert replay(READS, sparse) == []


def test_validation_names_each_bad_field_by_its_pointer():
    assert validate({"measure": "amount", "limit": 20000, "per": "1h",
                     "selector": {"team": "payments"}, "match": {"action": "payments.refund"}}
                    ) == []
    errors = validate({"measure": "bytes", "limit": -1, "per": "1y",
                       "selector": {"colour": "red", "labels": {"a": 1}},
                       "match": {"kind": ""}, "effect": "explode"})
    assert [e["pointer"] for e in errors] == [
        "/selector/colour", "/selector/labels", "/match/kind", "/measure", "/limit", "/per",
        "/effect"]
    assert [e["pointer"] for e in validate({"measure": "events", "limit": 5, "per": "10s"})] \
        == ["/per"]
    assert validate({"measure": "events", "limit": True, "per": "1h", "per_record": True,
                     "match": {"kind": "action"}})[0]["pointer"] == "/limit"


def test_a_group_budget_names_its_agents_from_80_percent_and_a_count_rule_at_its_limit():
    tokens = GroupRuleSpec(4, "team-tokens", {"team": "payments"}, {"kind": "model_call"},
                           "tokens", 10000, "1h")
    event = Event(id="m1", agent="", ts=T0, kind="model_call", input_tokens=1200,
                  output_tokens=300)
    (check,) = checks([tokens], PAY1, event)
    assert (check.value, check.limit, check.reported_above) == (1500.0, 10000, 8000)
    (count,) = checks([READS], PAY1, read("e1", "c-1", 0))
    assert (count.warn_at, count.reported_above) == (None, 50)


def test_over_limit_turns_window_totals_into_one_hit_per_window():
    from runtime.actions.group_rules import over_limit

    tokens = GroupRuleSpec(4, "team-tokens", {}, {}, "tokens", 100, "1h")

    class Agent:
        def __init__(self, pk):
            self.pk = pk

    def use(event_id, n):
        return Event(id=event_id, agent="", ts=T0, kind="model_call", input_tokens=n)

    found = [(Agent(1), e, checks([tokens], PAY1, e)[0])
             for e in (use("a", 70), use("b", 15), use("c", 10), use("d", 30))]
    hits = over_limit(found, [(70, []), (85, [1]), (95, [1, 2]), (125, [1, 2])])
    assert [(h["warning"], h["total"], h["agents"], h["event_id"]) for h in hits] == [
        (True, 95, [1, 2], "b"), (False, 125, [1, 2], "d")]
