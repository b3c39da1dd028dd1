"""The permission diff approvers read: exact lines for the refund agent's proposals, and
properties that hold for any pair of specs."""

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from registry.manifest import ACCESS_LEVELS, ENFORCEMENT_MODES, canonicalize
from registry.permission_diff import (
    PermissionChange,
    permission_diff,
    risk_score,
    summary,
)

# The refund agent exactly as DESIGN.md §4 shows it, canonical.
REFUND_AGENT = canonicalize({
    "framework": "langgraph",
    "connector": {"type": "sandbox"},
    "model": "gpt-4.1",
    "version": "2.3.0",
    "tools": ["orders.lookup", "payments.refund"],
    "data": [{"resource": "orders_db", "access": "read"},
             {"resource": "payments", "access": "write"}],
    "actions": {"payments.refund": {"approval_above": 500, "max": 5000}},
    "limits": [{"resource": "customers_db", "max_calls": 40, "per": "1h"},
               {"resource": "customers_db", "max_same_record": 3, "per": "1h"}],
    "grants": [{"resource": "crm", "access": "read", "expires_at": "2026-12-04T00:00:00Z",
                "reason": "Q4 audit"}],
    "enforcement": {"default": "correct", "actions": "escalate", "behaviour": "block"},
})


def proposal(**changes: Any) -> dict[str, Any]:
    """The refund agent with some spec fields replaced, canonical again."""
    return canonicalize(copy.deepcopy(REFUND_AGENT) | changes)


def change(area: str, risk: str, text: str, pointer: str, before: Any, after: Any
           ) -> PermissionChange:
    return PermissionChange(area, risk, text, pointer, before, after)  # type: ignore[arg-type]


def texts(changes: list[PermissionChange]) -> list[tuple[str, str]]:
    return [(c.text, c.risk) for c in changes]


def refund_action(approval_above: float | None, most: float | None = 5000) -> dict[str, Any]:
    return {"payments.refund": {"approval_above": approval_above, "max": most}}


def test_the_bad_deployment_shows_exactly_three_widening_lines():
    bad = proposal(
        tools=["crm.search", "orders.lookup", "payments.refund"],
        data=[*REFUND_AGENT["data"], {"resource": "crm", "access": "write"}],
        actions={"payments.refund": {"max": 5000}},
    )
    changes = permission_diff(REFUND_AGENT, bad)
    assert changes == [
        change("tools", "widening", "+ tool crm.search", "/tools/crm.search", None, "crm.search"),
        change("data", "widening", "+ crm write", "/data/crm", None, "write"),
        change("actions", "widening", "payments.refund approval threshold $500 → removed",
               "/actions/payments.refund/approval_above", 500, None),
    ]
    assert summary(changes) == {"widening": 3, "narrowing": 0, "neutral": 0}
    assert risk_score(changes) == 10 + 10 + 20
    assert changes[2].to_dict() == {
        "area": "actions", "risk": "widening",
        "text": "payments.refund approval threshold $500 → removed",
        "pointer": "/actions/payments.refund/approval_above", "before": 500, "after": None,
    }


def test_a_new_agent_lists_everything_access_widening_and_restrictions_neutral():
    changes = permission_diff(None, REFUND_AGENT)
    assert texts(changes) == [
        ("+ tool orders.lookup", "widening"),
        ("+ tool payments.refund", "widening"),
        ("+ orders_db read", "widening"),
        ("+ payments write", "widening"),
        ("+ grant crm read until 2026-12-04 (Q4 audit)", "widening"),
        ("payments.refund: approval above $500, never above $5,000", "neutral"),
        ("customers_db: at most 40 calls per 1h", "neutral"),
        ("customers_db: at most 3 reads of one record per 1h", "neutral"),
        ("enforcement of actions: escalate", "neutral"),
        ("enforcement of behaviour: block", "neutral"),
        ("enforcement of config: correct", "neutral"),
        ("default enforcement: correct", "neutral"),
        ("connector sandbox", "neutral"),
        ("framework langgraph", "neutral"),
        ("model gpt-4.1", "neutral"),
        ("version 2.3.0", "neutral"),
    ]
    assert [c.pointer for c in changes][:8] == [
        "/tools/orders.lookup", "/tools/payments.refund", "/data/orders_db", "/data/payments",
        "/grants/crm", "/actions/payments.refund", "/limits/customers_db/max_calls",
        "/limits/customers_db/max_same_record",
    ]
    assert risk_score(changes) == 50
    assert summary(changes) == {"widening": 5, "narrowing": 0, "neutral": 11}


def test_a_new_agent_names_a_missing_approval_threshold():
    spec = proposal(actions=refund_action(None), model="", version="")
    changes = permission_diff(None, spec)
    assert change("actions", "neutral", "payments.refund: no approval needed, never above $5,000",
                  "/actions/payments.refund", None, {"approval_above": None, "max": 5000}
                  ) in changes
    assert not [c for c in changes if c.pointer in ("/model", "/version")]


def test_action_thresholds_raised_lowered_removed_added():
    def lines(before: dict, after: dict) -> list[tuple[str, str]]:
        return texts(permission_diff(proposal(actions=before), proposal(actions=after)))

    assert lines(refund_action(500), refund_action(1000)) == [
        ("payments.refund approval threshold $500 → $1,000", "widening")]
    assert lines(refund_action(1000), refund_action(500)) == [
        ("payments.refund approval threshold $1,000 → $500", "narrowing")]
    assert lines(refund_action(None), refund_action(500)) == [
        ("payments.refund approval threshold added: $500", "narrowing")]
    assert lines(refund_action(500, 5000), refund_action(500, None)) == [
        ("payments.refund maximum $5,000 → removed", "widening")]
    assert lines(refund_action(12.5), refund_action(99.99, 1234567)) == [
        ("payments.refund approval threshold $12.50 → $99.99", "widening"),
        ("payments.refund maximum $5,000 → $1,234,567", "widening"),
    ]


def test_a_new_action_narrows_and_a_dropped_action_widens():
    gift = {"gifts.send": {"approval_above": 50, "max": None}}
    added = permission_diff(REFUND_AGENT, proposal(actions=refund_action(500) | gift))
    assert added == [change("actions", "narrowing", "gifts.send limits added: approval above $50",
                            "/actions/gifts.send", None, {"approval_above": 50, "max": None})]
    dropped = permission_diff(REFUND_AGENT, proposal(actions={}))
    assert texts(dropped) == [
        ("payments.refund limits removed: approval above $500, never above $5,000", "widening")]
    assert risk_score(dropped) == 20


def test_data_access_moves_both_ways():
    changes = permission_diff(REFUND_AGENT, proposal(data=[
        {"resource": "orders_db", "access": "write"}, {"resource": "payments", "access": "read"}]))
    assert changes == [
        change("data", "widening", "orders_db read → write", "/data/orders_db", "read", "write"),
        change("data", "narrowing", "payments write → read", "/data/payments", "write", "read"),
    ]
    removed = permission_diff(REFUND_AGENT, proposal(data=REFUND_AGENT["data"][:1]))
    assert texts(removed) == [("− payments", "narrowing")]
    assert texts(permission_diff(REFUND_AGENT, proposal(tools=["orders.lookup"]))) == [
        ("− tool payments.refund", "narrowing")]


def grant(expires_at: str, access: str = "read", reason: str = "Q4 audit",
          resource: str = "crm") -> dict[str, str]:
    return {"resource": resource, "access": access, "expires_at": expires_at, "reason": reason}


def test_grants_added_removed_extended_cut_short_and_widened():
    def lines(*grants: dict) -> list[tuple[str, str]]:
        return texts(permission_diff(REFUND_AGENT, proposal(grants=list(grants))))

    dec = "2026-12-04T00:00:00Z"
    assert lines() == [("− grant on crm", "narrowing")]
    assert lines(grant(dec), grant("2027-01-15T13:30:00Z", "write", "sync", "erp")) == [
        ("+ grant erp write until 2027-01-15 13:30 UTC (sync)", "widening")]
    assert lines(grant("2027-03-01T00:00:00Z")) == [
        ("grant on crm expires 2026-12-04 → 2027-03-01", "widening")]
    assert lines(grant("2026-11-30T09:15:30Z")) == [
        ("grant on crm expires 2026-12-04 → 2026-11-30 09:15:30 UTC", "narrowing")]
    assert lines(grant(dec, "admin", "Q4 audit, extended\nto payroll")) == [
        ("grant on crm read → admin", "widening"),
        ("grant on crm reason: Q4 audit → Q4 audit, extended to payroll", "neutral"),
    ]
    longer_write = proposal(grants=[grant("2027-03-01T00:00:00Z", "write")])
    assert [c.pointer for c in permission_diff(REFUND_AGENT, longer_write)] == [
        "/grants/crm/access", "/grants/crm/expires_at"]


def test_several_grants_on_one_resource_are_added_and_removed_whole():
    two = proposal(grants=[grant("2026-12-04T00:00:00Z"), grant("2027-06-01T00:00:00Z", "write")])
    assert texts(permission_diff(REFUND_AGENT, two)) == [
        ("+ grant crm write until 2027-06-01 (Q4 audit)", "widening")]
    assert texts(permission_diff(two, REFUND_AGENT)) == [
        ("− grant on crm write until 2027-06-01", "narrowing")]


def test_limits_loosened_tightened_removed_added():
    def lines(*limits: dict) -> list[tuple[str, str]]:
        return texts(permission_diff(REFUND_AGENT, proposal(limits=list(limits))))

    calls, same = REFUND_AGENT["limits"]
    assert lines({**calls, "max_calls": 100}, same) == [
        ("customers_db: at most 40 calls per 1h → 100 per 1h", "widening")]
    assert lines({**calls, "per": "2h"}, same) == [
        ("customers_db: at most 40 calls per 1h → 40 per 2h", "narrowing")]
    assert lines({**calls, "max_calls": 80, "per": "120m"}, same) == [
        ("customers_db: at most 40 calls per 1h → 80 per 2h", "neutral")]
    assert lines(calls) == [
        ("customers_db: at most 3 reads of one record per 1h → removed", "widening")]
    assert lines(calls, same, {"resource": "orders_db", "max_calls": 10, "per": "1m"}) == [
        ("orders_db limit added: at most 10 calls per 1m", "narrowing")]


def test_enforcement_weakened_strengthened_and_sideways():
    def lines(**modes: str) -> list[tuple[str, str]]:
        enforcement = {**REFUND_AGENT["enforcement"], **modes}
        return texts(permission_diff(REFUND_AGENT, proposal(enforcement=enforcement)))

    assert lines(actions="log") == [("enforcement of actions: escalate → log", "widening")]
    assert lines(actions="block") == [("enforcement of actions: escalate → block", "narrowing")]
    assert lines(behaviour="correct") == [("enforcement of behaviour: block → correct", "neutral")]
    assert lines(config="escalate") == [("enforcement of config: correct → escalate", "widening")]
    assert risk_score(permission_diff(REFUND_AGENT, proposal(enforcement={"default": "log"}))) == 20


def test_runtime_changes_are_neutral_and_a_connector_change_is_widening():
    http = {"type": "http", "url": "https://agents.example.com/refund", "secret_env": "REFUND_KEY"}
    changes = permission_diff(REFUND_AGENT, proposal(model="gpt-5", version="", connector=http))
    assert texts(changes) == [
        ("connector sandbox → http (https://agents.example.com/refund)", "widening"),
        ("model gpt-4.1 → gpt-5", "neutral"),
        ("version 2.3.0 → unset", "neutral"),
    ]
    rotated = proposal(connector={**http, "secret_env": "REFUND_KEY_2"})
    assert texts(permission_diff(proposal(connector=http), rotated)) == [(
        "connector http (https://agents.example.com/refund, secret REFUND_KEY)"
        " → http (https://agents.example.com/refund, secret REFUND_KEY_2)", "widening")]
    assert risk_score(changes) == 10


def test_owner_and_label_changes_are_listed_and_scored():
    before = {"owner": "alice", "labels": {"env": "prod", "team": "payments"}}
    after = {"owner": "erin", "labels": {"env": "dev", "tier": "1"}}
    changes = permission_diff(REFUND_AGENT, proposal(), metadata_before=before,
                              metadata_after=after)
    assert texts(changes) == [
        ("owner alice → erin", "widening"),
        ("label env: prod → dev", "widening"),
        ("− label team=payments", "widening"),
        ("+ label tier=1", "neutral"),
    ]
    assert risk_score(changes) == 10 + 5 + 5


def test_identical_specs_and_escaped_pointers():
    assert permission_diff(REFUND_AGENT, proposal()) == []
    odd = proposal(data=[{"resource": "s3://bucket/a~b", "access": "read"}])
    assert [c.pointer for c in permission_diff(REFUND_AGENT, odd)] == [
        "/data/orders_db", "/data/payments", "/data/s3:~1~1bucket~1a~0b"]
    assert summary([]) == {"widening": 0, "narrowing": 0, "neutral": 0}


# --- properties ---------------------------------------------------------------------------------

NAMES = ["orders.lookup", "payments.refund", "crm.search", "gifts.send"]
RESOURCES = ["orders_db", "payments", "crm", "a/b~c"]
AMOUNTS = [None, 0, 50, 500, 12.5, 5000]
STAMPS = ["2026-12-04T00:00:00Z", "2027-03-01T13:30:00Z", "2026-12-04T00:00:00.5Z"]


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    """Canonical specs drawn from small pools, so that two draws overlap."""
    actions = {}
    for name in draw(st.sets(st.sampled_from(NAMES))):
        above, most = draw(st.sampled_from(AMOUNTS)), draw(st.sampled_from(AMOUNTS[2:]))
        if above is not None and most is not None and above > most:
            above, most = most, above
        if (above, most) != (None, None):
            actions[name] = {"approval_above": above, "max": most}
    limits = draw(st.dictionaries(
        st.tuples(st.sampled_from(RESOURCES), st.sampled_from(["max_calls", "max_same_record"])),
        st.tuples(st.integers(1, 100), st.sampled_from(["30m", "1h", "2h", "1d"]))))
    mode = st.sampled_from(ENFORCEMENT_MODES)
    return canonicalize({
        "framework": draw(st.sampled_from(["langgraph", "crewai"])),
        "connector": draw(st.sampled_from([
            {"type": "sandbox"}, {"type": "push"},
            {"type": "http", "url": "https://a.example", "secret_env": "KEY"}])),
        "model": draw(st.sampled_from(["", "gpt-4.1", "gpt-5"])),
        "tools": sorted(draw(st.sets(st.sampled_from(NAMES)))),
        "data": [{"resource": r, "access": a} for r, a in draw(st.dictionaries(
            st.sampled_from(RESOURCES), st.sampled_from(ACCESS_LEVELS))).items()],
        "actions": actions,
        "limits": [{"resource": r, kind: n, "per": per} for (r, kind), (n, per) in limits.items()],
        "grants": draw(st.lists(st.builds(
            grant, st.sampled_from(STAMPS), st.sampled_from(ACCESS_LEVELS),
            st.sampled_from(["Q4 audit", "sync"]), st.sampled_from(RESOURCES[2:])), max_size=3)),
        "enforcement": {"default": draw(mode), "actions": draw(mode), "behaviour": draw(mode)},
    })


MIRROR = {"widening": "narrowing", "narrowing": "widening", "neutral": "neutral"}


@settings(max_examples=300, deadline=None)
@given(specs())
def test_a_spec_against_itself_changes_nothing(spec: dict[str, Any]):
    assert permission_diff(spec, spec) == []
    assert all(c.risk != "narrowing" for c in permission_diff(None, spec))


@settings(max_examples=300, deadline=None)
@given(specs(), specs())
def test_going_back_mirrors_every_risk(a: dict[str, Any], b: dict[str, Any]):
    forward, backward = permission_diff(a, b), permission_diff(b, a)
    access = [(c.pointer, c.risk) for c in forward if c.area in ("tools", "data")]
    assert all(risk != "neutral" for _, risk in access)
    assert sorted((p, MIRROR[r]) for p, r in access) == sorted(
        (c.pointer, c.risk) for c in backward if c.area in ("tools", "data"))
    # the same holds for every area when both sides exist, except the connector: a different
    # platform is trusted either way, so going back is widening too
    assert sorted((c.pointer, MIRROR[c.risk]) for c in forward if c.area != "connector") == (
        sorted((c.pointer, c.risk) for c in backward if c.area != "connector"))
    assert [c.risk for c in forward + backward if c.area == "connector"] in (
        [], ["widening", "widening"])
    assert forward == sorted(forward, key=lambda c: (
        ["tools", "data", "grants", "actions", "limits", "enforcement", "owner", "labels",
         "connector", "runtime"].index(c.area), c.pointer))
