"""What ingest's batch path takes for granted when it judges a thousand events at a time: an
agent's windows made once per resource give every event the windows it would get alone, and
an event the path does not hand to static_violations (approved tool and resource, no action)
is one static_violations would find nothing in."""

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from registry.manifest import duration_seconds
from runtime.behaviour import (
    callable_tools,
    granted_resources,
    may_break_a_static_rule,
    static_violations,
    window_checks,
)
from runtime.events import Event

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
TOOLS = ["crm.search", "orders.lookup", "refunds/issue~1"]
RESOURCES = ["customers_db", "orders_db", "a/b~c"]
PERIODS = ["1m", "1h", "1d"]

limits = st.lists(st.one_of(
    st.fixed_dictionaries({"resource": st.sampled_from(RESOURCES),
                           "max_calls": st.integers(1, 100), "per": st.sampled_from(PERIODS)}),
    st.fixed_dictionaries({"resource": st.sampled_from(RESOURCES),
                           "max_same_record": st.integers(1, 10),
                           "per": st.sampled_from(PERIODS)})), max_size=5)
specs = st.fixed_dictionaries({
    "tools": st.lists(st.sampled_from(TOOLS), unique=True),
    "data": st.lists(st.sampled_from(RESOURCES), unique=True).map(
        lambda names: [{"resource": name, "access": "read"} for name in names]),
    "limits": limits,
    "actions": st.just({"refund": {"max": 500, "approval_above": 100}}),
})
events = st.builds(
    lambda n, tool, resource, record, action, amount: Event.of(
        id=f"e-{n}", agent="a", ts=NOW, kind="tool_call", tool=tool, resource=resource,
        record=record, action=action, amount=amount),
    st.integers(0, 10**6), st.sampled_from(["", "other.tool", *TOOLS]),
    st.sampled_from(["", "other_db", *RESOURCES]), st.sampled_from(["", "c-1", "c/2~"]),
    st.sampled_from(["", "refund"]), st.sampled_from([None, 50.0, 250.0, 900.0]))


@given(specs, st.lists(events, max_size=30))
def test_windows_made_once_per_resource_are_the_windows_each_event_gets_alone(spec, batch):
    durations = {limit["per"]: duration_seconds(limit["per"]) for limit in spec["limits"]}
    made: dict = {}
    together = [window_checks(spec, event, 7, durations, made) for event in batch]
    alone = [window_checks(spec, event, 7, durations) for event in batch]
    assert together == alone


@given(specs, events, st.booleans(), st.booleans())
def test_an_event_with_an_approved_tool_and_resource_and_no_action_breaks_no_static_rule(
        spec, event, signed_off, reused):
    tools, granted = callable_tools(spec), granted_resources(spec)
    found = static_violations(spec, event, signed_off=signed_off, reused_decision=reused,
                              tools=tools, granted=granted)
    if not may_break_a_static_rule(event, tools, granted):
        assert found == []
