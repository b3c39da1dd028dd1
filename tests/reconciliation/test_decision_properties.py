"""Property: whatever a decision request holds (random fields, types, missing and misspelled
keys, strings for numbers) and whatever the spec says, nothing a rule constrains is ever
`allow` without the values the rule needs, and nothing the spec does not name is `allow`
unless the spec opens unnamed actions. The oracle below reads amounts on its own terms."""

import math
import re
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.manifest import canonicalize
from runtime.actions.decisions import evaluate
from runtime.decision_request import RequestError, parse_request

NAMES = ["payments.refund", "orders.lookup", "crm.export", "refund_order", "delete_file"]
AGENT = SimpleNamespace(lifecycle="active", name="refund-agent", pk=1)
NOW = __import__("datetime").datetime(2026, 1, 1, tzinfo=__import__("datetime").UTC)

thresholds = st.one_of(st.none(), st.integers(0, 10_000), st.floats(0.5, 10_000))


@st.composite
def specs(draw) -> dict:
    actions = {}
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=3)):
        above, most = draw(thresholds), draw(thresholds)
        if above is None and most is None:
            above = draw(st.integers(0, 1000))
        if above is not None and most is not None and above > most:
            above, most = most, above
        if most == 0:
            most = None if above is not None else 1
            above = above if most is None else None
        actions[name] = {"approval_above": above, "max": most}
    raw = {"framework": "langgraph", "connector": {"type": "sandbox"},
           "tools": draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4)),
           "actions": actions}
    if draw(st.booleans()):
        raw["unlisted_actions"] = draw(st.sampled_from(["allow", "deny"]))
    return canonicalize(raw)


numbers_as_text = st.one_of(
    st.integers(-1000, 10**13).map(str), st.floats(allow_nan=True).map(str),
    st.sampled_from(["800", "800.50", "0", "08", "1e3", " 800", "800 ", "1,000", "$800",
                     "800.", ".5", "-0", "NaN", "inf", ""]))
values = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**13),
    st.floats(allow_nan=True, allow_infinity=True), numbers_as_text, st.text(max_size=8),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                         max_size=2))
amount_keys = st.sampled_from(["amount", "Amount", "AMOUNT", "amt", "amount ", "refund_amount",
                               "value", "sum"])


@st.composite
def requests(draw) -> dict:
    body = {}
    for key in draw(st.lists(st.sampled_from(["tool", "action", "arguments", "amount",
                                              "record", "wait_seconds", "Amount", "tools",
                                              "arguments ", "args"]), unique=True)):
        if key in ("tool", "action"):
            body[key] = draw(st.one_of(st.sampled_from(NAMES), values))
        elif key == "arguments":
            body[key] = draw(st.one_of(
                st.dictionaries(amount_keys, values, max_size=3).map(
                    lambda args: {"order": "A-1", **args}), values))
        else:
            body[key] = draw(values)
    return body


_PLAIN = re.compile(r"(0|[1-9][0-9]*)(\.[0-9]+)?")


def readable(value) -> float | None:
    """The oracle: a finite non-negative number (not a bool) or a plain decimal string."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1e12:
        return float(value)
    if isinstance(value, str) and _PLAIN.fullmatch(value) and float(value) <= 1e12:
        return float(value)
    return None


@settings(max_examples=600, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(spec=specs(), body=requests())
def test_nothing_a_rule_constrains_is_allowed_without_what_it_reads(spec, body):
    try:
        request = parse_request(body)
    except RequestError:
        return  # refused whole (400): not an allow
    outcome, rule = evaluate(spec, request, AGENT, NOW)
    assert rule, "every decision names its rule"
    if outcome != "allow":
        return
    action = body.get("action") or body.get("tool")
    tools = set(spec["tools"])
    assert not body.get("tool") or body["tool"] in tools
    limits = spec["actions"].get(action)
    if limits is None:
        assert action in tools or spec.get("unlisted_actions") == "allow", (body, spec)
        return
    arguments = body.get("arguments") if isinstance(body.get("arguments"), dict) else {}
    sent = [body[key] for key in ("amount",) if body.get(key) is not None]
    sent += [arguments[key] for key in ("amount",) if key in arguments]
    read = [readable(value) for value in sent]
    assert read and None not in read, (body, spec, rule)  # the rule's amount was there
    assert len(set(read)) == 1, (body, rule)  # and it was one amount
    for ceiling in (limits["approval_above"], limits["max"]):
        assert ceiling is None or read[0] <= ceiling, (body, spec, rule)
