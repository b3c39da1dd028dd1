"""The readable diff a reviewer reads: list items keyed by what they are, so one added tool is
one added line, with the same pointers the drift engine gives its findings."""

from hypothesis import given
from hypothesis import strategies as st

from audit.jsondiff import Change, flat_changes
from reconciliation.reconciler.diff import diff

NOW = "2026-11-30T12:00:00+00:00"


def test_one_tool_added_in_front_is_one_added_tool_not_three_renamed_positions():
    before = {"tools": ["docs.search", "orders.lookup"]}
    after = {"tools": ["crm.search", "docs.search", "orders.lookup"]}
    assert flat_changes(before, after) == [
        Change("/tools/crm.search", "added", after="crm.search")]


def test_a_removed_tool_and_a_reordered_list_say_only_what_changed():
    assert flat_changes({"tools": ["a", "b", "c"]}, {"tools": ["c", "a"]}) == [
        Change("/tools/b", "removed", before="b")]


def test_data_scopes_are_named_by_resource_and_limits_by_resource_and_metric():
    before = {"data": [{"resource": "orders_db", "access": "read"}],
              "limits": [{"resource": "crm", "max_calls": 40, "per": "1h"},
                         {"resource": "crm", "max_same_record": 3, "per": "1h"}]}
    after = {"data": [{"resource": "crm", "access": "read"},
                      {"resource": "orders_db", "access": "write"}],
             "limits": [{"resource": "crm", "max_same_record": 3, "per": "1h"},
                        {"resource": "crm", "max_calls": 80, "per": "1h"}]}
    assert flat_changes(before, after) == [
        Change("/data/crm/access", "added", after="read"),
        Change("/data/orders_db/access", "changed", "read", "write"),
        Change("/limits/crm/max_calls", "changed", 40, 80)]


def test_the_proposal_diff_and_the_drift_finding_name_a_tool_the_same_way():
    from datetime import datetime

    approved = {"tools": ["docs.search"], "data": [], "actions": {}, "limits": [],
                "grants": [], "running": True}
    live = {**approved, "tools": ["docs.search", "crm.search"]}
    drift = diff(approved, live, datetime.fromisoformat(NOW))
    assert [d.pointer for d in drift] == [c.pointer for c in flat_changes(approved, live)] == [
        "/tools/crm.search"]


def test_items_without_a_unique_name_stay_positional():
    assert flat_changes({"x": [1, 1]}, {"x": [1, 2]}) == [Change("/x/1", "changed", 1, 2)]
    assert flat_changes({"x": [{"per": "1h"}]}, {"x": [{"per": "2h"}]}) == [
        Change("/x/0/per", "changed", "1h", "2h")]
    assert flat_changes(None, {"x": [[1], [2]]}) == [
        Change("/x/0/0", "added", after=1), Change("/x/1/0", "added", after=2)]


names = st.lists(st.sampled_from(["a", "b", "c", "d", "e/f", "g~h"]), unique=True, min_size=1)


@given(names, names)
def test_a_list_of_names_differs_by_exactly_the_names_added_and_removed(old, new):
    changes = flat_changes({"tools": old}, {"tools": new})
    assert sorted(c.after for c in changes if c.kind == "added") == sorted(set(new) - set(old))
    assert sorted(c.before for c in changes if c.kind == "removed") == sorted(set(old) - set(new))
    assert all(c.kind != "changed" for c in changes)
