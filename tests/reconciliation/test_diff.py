"""The pure diff engine: exact drifts for the refund agent's life, plus convergence properties."""

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciliation.reconciler.diff import (
    Drift,
    Operation,
    apply_operations,
    diff,
    effective_desired,
)
from reconciliation.reconciler.plan import plan

BEFORE_EXPIRY = datetime(2026, 11, 1, tzinfo=UTC)
AT_EXPIRY = datetime(2026, 12, 4, tzinfo=UTC)
CRM_AUDIT_GRANT = {
    "resource": "crm",
    "access": "read",
    "expires_at": "2026-12-04T00:00:00Z",
    "reason": "Q4 audit",
}


def refund_agent(**changes: Any) -> dict[str, Any]:
    """The refund agent's canonical spec, as the manifest module stores it."""
    spec = {
        "framework": "langgraph",
        "connector": {"type": "sandbox"},
        "model": "gpt-4.1",
        "version": "2.3.0",
        "tools": ["orders.lookup", "payments.refund"],
        "data": [
            {"resource": "orders_db", "access": "read"},
            {"resource": "payments", "access": "write"},
        ],
        "actions": {"payments.refund": {"approval_above": 500, "max": 5000}},
        "limits": [
            {"resource": "customers_db", "max_calls": 40, "per": "1h"},
            {"resource": "customers_db", "max_same_record": 3, "per": "1h"},
        ],
        "grants": [],
        "enforcement": {
            "default": "correct",
            "config": "correct",
            "actions": "escalate",
            "behaviour": "block",
        },
    }
    spec.update(changes)
    return spec


def refund_agent_observed(**changes: Any) -> dict[str, Any]:
    """What the refund agent's platform reports when it runs exactly as approved."""
    observed = {
        "framework": "langgraph",
        "connector": {"type": "sandbox"},
        "model": "gpt-4.1",
        "version": "2.3.0",
        "tools": ["orders.lookup", "payments.refund"],
        "data": [
            {"resource": "orders_db", "access": "read"},
            {"resource": "payments", "access": "write"},
        ],
        "actions": {"payments.refund": {"approval_above": 500, "max": 5000}},
        "limits": [
            {"resource": "customers_db", "max_calls": 40, "per": "1h"},
            {"resource": "customers_db", "max_same_record": 3, "per": "1h"},
        ],
        "grants": [],
        "running": True,
    }
    observed.update(changes)
    return observed


def with_data(*entries: tuple[str, str]) -> list[dict[str, str]]:
    return [{"resource": resource, "access": access} for resource, access in entries]


BASE_DATA = (("orders_db", "read"), ("payments", "write"))

DIFF_CASES = [
    pytest.param(refund_agent(), refund_agent_observed(), BEFORE_EXPIRY, False, [], id="converged"),
    pytest.param(
        refund_agent(),
        refund_agent_observed(
            tools=["orders.lookup", "payments.refund", "crm.search"],
            data=with_data(*BASE_DATA, ("crm", "write")),
            actions={"payments.refund": {"max": 5000}},
        ),
        BEFORE_EXPIRY,
        False,
        [
            ("action_limit_missing", "/actions/payments.refund/approval_above", 500, None, "high"),
            ("data_added", "/data/crm", None, "write", "high"),
            ("tool_added", "/tools/crm.search", None, "crm.search", "medium"),
        ],
        id="refund-agent-bad-deployment",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(data=with_data(("orders_db", "read"), ("payments", "read"))),
        BEFORE_EXPIRY,
        False,
        [("data_narrowed", "/data/payments", "write", "read", "low")],
        id="write-implies-read-narrowed",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(data=with_data(("orders_db", "write"), ("payments", "write"))),
        BEFORE_EXPIRY,
        False,
        [("data_widened", "/data/orders_db", "read", "write", "high")],
        id="write-beyond-read-widened",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(data=with_data(("orders_db", "read"), ("payments", "superuser"))),
        BEFORE_EXPIRY,
        False,
        [("data_widened", "/data/payments", "write", "superuser", "high")],
        id="unknown-access-level-fails-closed",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(data=with_data(("payments", "write")), tools=["orders.lookup"]),
        BEFORE_EXPIRY,
        False,
        [
            ("data_removed", "/data/orders_db", "read", None, "low"),
            ("tool_removed", "/tools/payments.refund", "payments.refund", None, "low"),
        ],
        id="missing-tool-and-scope-are-narrowing",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(actions={"payments.refund": {"approval_above": 1000, "max": 5000}}),
        BEFORE_EXPIRY,
        False,
        [("action_limit_raised", "/actions/payments.refund/approval_above", 500, 1000, "medium")],
        id="approval-threshold-raised",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(actions={"payments.refund": {"approval_above": 100, "max": 5000}}),
        BEFORE_EXPIRY,
        False,
        [("action_limit_lowered", "/actions/payments.refund/approval_above", 500, 100, "low")],
        id="approval-threshold-lowered",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(actions={"payments.refund": {"approval_above": 500.0, "max": 5000}}),
        BEFORE_EXPIRY,
        False,
        [],
        id="numbers-compare-by-value",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(actions={"orders.lookup": {"max": 1}}),
        BEFORE_EXPIRY,
        False,
        [
            ("action_limit_missing", "/actions/payments.refund/approval_above", 500, None, "high"),
            ("action_limit_missing", "/actions/payments.refund/max", 5000, None, "high"),
        ],
        id="action-not-observed-extra-action-ignored",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(
            limits=[
                {"resource": "customers_db", "max_calls": 80, "per": "1h"},
                {"resource": "customers_db", "max_same_record": 1, "per": "1h"},
                {"resource": "orders_db", "max_calls": 10, "per": "1h"},
            ]
        ),
        BEFORE_EXPIRY,
        False,
        [
            ("limit_raised", "/limits/customers_db/max_calls", 40, 80, "medium"),
            ("limit_lowered", "/limits/customers_db/max_same_record", 3, 1, "low"),
            ("limit_added", "/limits/orders_db/max_calls", None, 10, "low"),
        ],
        id="behaviour-limits",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(
            limits=[
                {"resource": "customers_db", "max_calls": 40, "per": "1m"},
                {"resource": "customers_db", "max_same_record": 3},
            ]
        ),
        BEFORE_EXPIRY,
        False,
        [("limit_missing", "/limits/customers_db/max_calls", 40, None, "high")],
        id="limit-in-another-window-is-missing",
    ),
    pytest.param(
        refund_agent(),
        {"tools": ["orders.lookup", "payments.refund"], "data": with_data(*BASE_DATA)},
        BEFORE_EXPIRY,
        False,
        [
            ("action_limit_missing", "/actions/payments.refund/approval_above", 500, None, "high"),
            ("action_limit_missing", "/actions/payments.refund/max", 5000, None, "high"),
            ("limit_missing", "/limits/customers_db/max_calls", 40, None, "high"),
            ("limit_missing", "/limits/customers_db/max_same_record", 3, None, "high"),
        ],
        id="sparse-observation-unknown-model-version-running",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(model="gpt-4o", version="2.3.0"),
        BEFORE_EXPIRY,
        False,
        [("model_mismatch", "/model", "gpt-4.1", "gpt-4o", "medium")],
        id="model-mismatch",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(version="2.2.9"),
        BEFORE_EXPIRY,
        False,
        [("version_mismatch", "/version", "2.3.0", "2.2.9", "medium")],
        id="version-mismatch",
    ),
    pytest.param(
        refund_agent(grants=[CRM_AUDIT_GRANT]),
        refund_agent_observed(data=with_data(*BASE_DATA, ("crm", "read"))),
        BEFORE_EXPIRY,
        False,
        [],
        id="grant-live",
    ),
    pytest.param(
        refund_agent(grants=[CRM_AUDIT_GRANT]),
        refund_agent_observed(data=with_data(*BASE_DATA, ("crm", "read"))),
        AT_EXPIRY,
        False,
        [("expired_grant_present", "/data/crm", None, "read", "medium")],
        id="grant-expired-at-now-still-present",
    ),
    pytest.param(
        refund_agent(grants=[CRM_AUDIT_GRANT]),
        refund_agent_observed(),
        AT_EXPIRY,
        False,
        [],
        id="grant-expired-and-gone",
    ),
    pytest.param(
        refund_agent(grants=[CRM_AUDIT_GRANT]),
        refund_agent_observed(),
        BEFORE_EXPIRY,
        False,
        [("data_removed", "/data/crm", "read", None, "low")],
        id="grant-live-but-not-applied",
    ),
    pytest.param(
        refund_agent(grants=[CRM_AUDIT_GRANT]),
        refund_agent_observed(data=with_data(*BASE_DATA, ("crm", "write"))),
        AT_EXPIRY,
        False,
        [("data_added", "/data/crm", None, "write", "high")],
        id="access-beyond-the-expired-grant-is-plain-widening",
    ),
    pytest.param(
        refund_agent(grants=[{**CRM_AUDIT_GRANT, "resource": "orders_db", "access": "write"}]),
        refund_agent_observed(
            grants=[{**CRM_AUDIT_GRANT, "resource": "orders_db", "access": "write"}]
        ),
        AT_EXPIRY,
        False,
        [("expired_grant_present", "/data/orders_db", "read", "write", "high")],
        id="observed-expired-grant-above-base-access",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(running=True),
        BEFORE_EXPIRY,
        True,
        [("running_while_suspended", "/running", False, True, "high")],
        id="running-while-suspended",
    ),
    pytest.param(
        refund_agent(),
        refund_agent_observed(running=False),
        BEFORE_EXPIRY,
        False,
        [("stopped_while_active", "/running", True, False, "low")],
        id="stopped-while-active",
    ),
    pytest.param(
        refund_agent(tools=["mail/send~v2"], data=[], actions={}, limits=[]),
        {"tools": []},
        BEFORE_EXPIRY,
        False,
        [("tool_removed", "/tools/mail~1send~0v2", "mail/send~v2", None, "low")],
        id="pointer-escaping",
    ),
]


@pytest.mark.parametrize(("desired", "actual", "now", "suspended", "expected"), DIFF_CASES)
def test_diff(desired, actual, now, suspended, expected):
    drifts = diff(desired, actual, now, suspended=suspended)
    assert [(d.kind, d.pointer, d.expected, d.actual, d.severity) for d in drifts] == expected


def test_refund_agent_bad_deployment_full_drifts_and_plan():
    actual = refund_agent_observed(
        tools=["orders.lookup", "payments.refund", "crm.search"],
        data=with_data(*BASE_DATA, ("crm", "write")),
        actions={"payments.refund": {"max": 5000}},
    )
    drifts = diff(refund_agent(), actual, BEFORE_EXPIRY)
    assert [(d.area, d.operation.to_dict()) for d in drifts] == [
        (
            "actions",
            {
                "op": "set_action_limit",
                "target": "payments.refund",
                "value": {"approval_above": 500},
            },
        ),
        ("config", {"op": "remove_data", "target": "crm", "value": None}),
        ("config", {"op": "remove_tool", "target": "crm.search", "value": None}),
    ]
    assert [op.to_dict() for op in plan(refund_agent(), actual, BEFORE_EXPIRY)] == [
        d.operation.to_dict() for d in drifts
    ]
    assert apply_operations(actual, plan(refund_agent(), actual, BEFORE_EXPIRY)) == (
        refund_agent_observed(
            data=with_data(*BASE_DATA),
            actions={"payments.refund": {"max": 5000, "approval_above": 500}},
        )
    )


def test_plan_suspends_first_and_resumes_last():
    running = refund_agent_observed(running=True, tools=["orders.lookup"], model="gpt-4o")
    assert [
        op.to_dict() for op in plan(refund_agent(), running, BEFORE_EXPIRY, suspended=True)
    ] == [
        {"op": "suspend", "target": "agent", "value": None},
        {"op": "set_model", "target": "model", "value": "gpt-4.1"},
        {"op": "add_tool", "target": "payments.refund", "value": None},
    ]
    stopped = refund_agent_observed(running=False, data=with_data(("orders_db", "admin")))
    assert [op.to_dict() for op in plan(refund_agent(), stopped, BEFORE_EXPIRY)] == [
        {"op": "set_data_access", "target": "orders_db", "value": "read"},
        {"op": "set_data_access", "target": "payments", "value": "write"},
        {"op": "resume", "target": "agent", "value": None},
    ]


def test_apply_operations_limits_grants_and_dict_operations():
    actual = {
        "data": with_data(("crm", "read")),
        "grants": [{**CRM_AUDIT_GRANT, "access": "admin"}],
        "limits": [{"resource": "customers_db", "max_calls": 80, "max_same_record": 3}],
    }
    operations = [
        {"op": "set_data_access", "target": "crm", "value": "read"},
        {"op": "set_limit", "target": "customers_db", "value": {"max_calls": 40, "per": "1h"}},
        Operation("remove_limit", "customers_db", "max_same_record"),
    ]
    before = copy.deepcopy(actual)
    assert apply_operations(actual, operations) == {
        "data": with_data(("crm", "read")),
        "grants": [],
        "limits": [{"resource": "customers_db", "max_calls": 40, "per": "1h"}],
    }
    assert actual == before


def test_effective_desired_merges_live_grants_and_drops_expired_ones():
    spec = refund_agent(
        grants=[
            {**CRM_AUDIT_GRANT, "resource": "orders_db", "access": "write"},
            {**CRM_AUDIT_GRANT, "expires_at": "2026-10-01T00:00:00Z"},
        ]
    )
    effective = effective_desired(spec, BEFORE_EXPIRY, suspended=True)
    assert effective["data"] == with_data(("orders_db", "write"), ("payments", "write"))
    assert effective["grants"] == [{**CRM_AUDIT_GRANT, "resource": "orders_db", "access": "write"}]
    assert effective["running"] is False
    assert effective["enforcement"] == spec["enforcement"]
    assert effective_desired(spec, AT_EXPIRY)["data"] == with_data(*BASE_DATA)
    assert effective_desired(spec, AT_EXPIRY)["running"] is True


def test_effective_desired_refuses_naive_now():
    with pytest.raises(ValueError, match="timezone-aware"):
        effective_desired(refund_agent(), datetime(2026, 11, 1))


def test_drift_fingerprint_and_to_dict():
    first = diff(
        refund_agent(), {"actions": {"payments.refund": {"approval_above": 900}}}, AT_EXPIRY
    )
    again = diff(
        refund_agent(), {"actions": {"payments.refund": {"approval_above": 900.0}}}, AT_EXPIRY
    )
    raised = next(d for d in first if d.kind == "action_limit_raised")
    assert (
        raised.fingerprint == next(d for d in again if d.kind == "action_limit_raised").fingerprint
    )
    assert len({d.fingerprint for d in first}) == len(first)
    assert raised.to_dict() == {
        "kind": "action_limit_raised",
        "pointer": "/actions/payments.refund/approval_above",
        "expected": 500,
        "actual": 900,
        "severity": "medium",
        "area": "actions",
        "operation": {
            "op": "set_action_limit",
            "target": "payments.refund",
            "value": {"approval_above": 500},
        },
        "fingerprint": raised.fingerprint,
    }
    assert isinstance(raised, Drift) and len(raised.fingerprint) == 64


# --- properties -----------------------------------------------------------------------------

NOW = datetime(2026, 6, 1, tzinfo=UTC)
TOOLS = ["orders.lookup", "payments.refund", "crm.search", "mail/send", "odd~name"]
RESOURCES = ["orders_db", "payments", "crm", "customers_db"]
ACCESS = ["read", "write", "admin"]
EXPIRIES = ["2026-05-01T00:00:00Z", "2026-06-01T00:00:00Z", "2026-12-04T00:00:00Z"]
AMOUNTS = st.none() | st.integers(0, 10_000) | st.sampled_from([99.5, 500.0])
COUNTS = st.integers(1, 100)

grants = st.fixed_dictionaries(
    {
        "resource": st.sampled_from(RESOURCES),
        "access": st.sampled_from(ACCESS),
        "expires_at": st.sampled_from(EXPIRIES),
        "reason": st.just("Q4 audit"),
    }
)


@st.composite
def desired_specs(draw: st.DrawFn) -> dict[str, Any]:
    data = draw(st.dictionaries(st.sampled_from(RESOURCES), st.sampled_from(ACCESS)))
    limit_keys = draw(
        st.sets(
            st.tuples(st.sampled_from(RESOURCES), st.sampled_from(["max_calls", "max_same_record"]))
        )
    )
    return refund_agent(
        model=draw(st.sampled_from(["gpt-4.1", "gpt-4o"])),
        version=draw(st.sampled_from(["2.3.0", "2.4.0"])),
        tools=sorted(draw(st.sets(st.sampled_from(TOOLS)))),
        data=[{"resource": r, "access": data[r]} for r in sorted(data)],
        actions=draw(
            st.dictionaries(
                st.sampled_from(TOOLS),
                st.fixed_dictionaries({"approval_above": AMOUNTS, "max": AMOUNTS}),
                max_size=3,
            )
        ),
        limits=[
            {"resource": resource, metric: draw(COUNTS), "per": "1h"}
            for resource, metric in sorted(limit_keys)
        ],
        grants=draw(st.lists(grants, max_size=3)),
    )


observed_limits = st.builds(
    lambda resource, metric, value, per: {"resource": resource, metric: value, **per},
    st.sampled_from(RESOURCES),
    st.sampled_from(["max_calls", "max_same_record"]),
    COUNTS | st.none(),
    st.sampled_from([{"per": "1h"}, {"per": "1d"}, {}]),
)

observed_states = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["gpt-4.1", "gpt-4o"]) | st.none(),
        "version": st.sampled_from(["2.3.0", "2.4.0"]),
        "tools": st.lists(st.sampled_from([*TOOLS, "shell.exec"]), max_size=6),
        "data": st.lists(
            st.fixed_dictionaries(
                {
                    "resource": st.sampled_from(RESOURCES),
                    "access": st.sampled_from([*ACCESS, "superuser"]),
                }
            ),
            max_size=5,
        ),
        "actions": st.dictionaries(
            st.sampled_from(TOOLS),
            st.fixed_dictionaries(
                {}, optional={"approval_above": AMOUNTS, "max": AMOUNTS | st.just("5000")}
            ),
            max_size=3,
        ),
        "limits": st.lists(observed_limits, max_size=4),
        "grants": st.lists(grants, max_size=3),
        "running": st.booleans(),
    },
)


@st.composite
def desired_and_actual(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """Half the time an unrelated observation, otherwise a converged one with a few keys changed."""
    desired, observed = draw(desired_specs()), draw(observed_states)
    if draw(st.booleans()):
        return desired, observed
    converged = effective_desired(desired, NOW)
    del converged["enforcement"]
    return desired, {**converged, **observed}


@settings(max_examples=300, deadline=None)
@given(pair=desired_and_actual(), suspended=st.booleans())
def test_applying_the_plan_converges_and_replanning_is_empty(pair, suspended):
    desired, actual = pair
    before = copy.deepcopy(actual)
    operations = plan(desired, actual, NOW, suspended=suspended)
    corrected = apply_operations(actual, operations)
    assert actual == before
    assert diff(desired, corrected, NOW, suspended=suspended) == []
    assert plan(desired, corrected, NOW, suspended=suspended) == []
    assert len({op.key for op in operations}) == len(operations)


@settings(max_examples=100, deadline=None)
@given(pair=desired_and_actual())
def test_diff_is_sorted_and_every_drift_has_a_planned_correction(pair):
    desired, actual = pair
    drifts = diff(desired, actual, NOW)
    assert drifts == sorted(drifts, key=lambda d: (d.pointer, d.kind))
    assert {d.operation.key for d in drifts} == {op.key for op in plan(desired, actual, NOW)}
