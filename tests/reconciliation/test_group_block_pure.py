"""A group rule's effect `block`, as pure functions: validated (not with per-record windows),
it denies the decisions of every agent it covers while the window holds more than the limit,
with a reason naming the rule, and only then."""

from runtime.group_rules import (
    EFFECTS,
    AgentFacts,
    GroupRuleSpec,
    block_reason,
    blocks,
    validate,
)

PAY = AgentFacts(1, "pay-c", "alice", {"team": "payments"})
SUPPORT = AgentFacts(2, "support", "alice", {"team": "support"})
TOKENS = GroupRuleSpec(4, "payments-tokens", {"team": "payments"}, {"kind": "model_call"},
                       "tokens", 10000, "1h", effect="block")
RULE = {"selector": {"team": "payments"}, "measure": "tokens", "limit": 10000, "per": "1h"}


def test_the_effects_are_escalate_log_and_block_and_others_are_refused():
    assert EFFECTS == ("escalate", "log", "block")
    assert validate({**RULE, "effect": "block"}) == []
    assert validate(RULE) == []  # the default (escalate) is unchanged
    assert validate({**RULE, "effect": "suspend"}) == [
        {"pointer": "/effect", "message": "expected one of escalate, log, block"}]
    assert validate({**RULE, "measure": "events", "per_record": True, "effect": "block",
                     "match": {"kind": "data_access"}}) == [
        {"pointer": "/effect",
         "message": "block covers the whole group: not with per-record windows"}]


def test_block_denies_the_group_only_above_the_limit():
    assert not blocks(TOKENS, PAY, 10000)  # at the limit: not above it
    assert blocks(TOKENS, PAY, 10000.5)
    assert not blocks(TOKENS, SUPPORT, 50000)  # outside the group
    escalate = GroupRuleSpec(5, "escalating", {}, {}, "tokens", 10, "1h")
    assert not blocks(escalate, PAY, 50000)  # other effects never deny
    assert block_reason(TOKENS, 10200) == (
        "group rule payments-tokens: 10,200 tokens across the group per 1h, above 10,000: "
        "the group is blocked until the window falls back under the limit")
