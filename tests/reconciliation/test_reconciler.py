"""The reconcile decision as a pure function: exact changes, a second pass that changes nothing,
and a crash injected between any two changes that the next pass finishes."""

from datetime import UTC, datetime, timedelta

import pytest

from reconciliation.reconciler.diff import apply_operations
from reconciliation.reconciler.plan import FindingView, decide, idempotency_key
from tests.conftest import refund_manifest

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SPEC = refund_manifest(enforcement={"default": "correct"}, grants=[
    {"resource": "crm", "access": "read", "expires_at": "2026-12-04T00:00:00Z",
     "reason": "Q4 audit"}]).spec


def deployed() -> dict:
    """The agent exactly as approved (what the sandbox starts from)."""
    state = {k: v for k, v in SPEC.items() if k != "enforcement"}
    state["data"] = [*state["data"], {"resource": "crm", "access": "read"}]
    return {**state, "running": True}


def bad_deployment() -> dict:
    state = deployed()
    state["tools"] = [*state["tools"], "crm.search"]
    state["data"] = [d for d in state["data"] if d["resource"] != "crm"] + [
        {"resource": "crm", "access": "write"}]
    state["actions"] = {"payments.refund": {"max": 5000}}
    return state


def run(actual: dict, now: datetime = NOW, **kwargs):
    return decide(SPEC, actual, now, agent="refund-agent", generation=1, **kwargs)


def test_a_converged_agent_needs_nothing():
    decision = run(deployed())
    assert decision.converged and decision.apply == [] and decision.escalate == []


def test_the_bad_deployment_gives_exactly_three_keyed_changes_most_severe_first():
    decision = run(bad_deployment())
    assert [(s.operation.op, s.operation.target, s.operation.value) for s in decision.apply] == [
        ("set_action_limit", "payments.refund", {"approval_above": 500}),
        ("set_data_access", "crm", "read"),
        ("remove_tool", "crm.search", None),
    ]
    assert [s.drift.severity for s in decision.apply] == ["high", "high", "medium"]
    assert {s.key for s in decision.apply} == {
        idempotency_key("refund-agent", 1, s.operation, 1) for s in decision.apply}


def test_applying_the_decision_converges_and_a_second_pass_changes_nothing():
    first = run(bad_deployment())
    fixed = apply_operations(bad_deployment(), [s.operation for s in first.apply])
    second = run(fixed)
    assert second.converged and second.apply == []


@pytest.mark.parametrize("crash_after", [0, 1, 2])
def test_a_crash_between_any_two_changes_is_finished_by_the_next_pass(crash_after):
    first = run(bad_deployment())
    done = first.apply[:crash_after]
    partial = apply_operations(bad_deployment(), [s.operation for s in done])
    second = run(partial)
    # Exactly the changes not yet made, under the same keys: none is applied twice.
    assert [s.key for s in second.apply] == [s.key for s in first.apply[crash_after:]]
    assert run(apply_operations(partial, [s.operation for s in second.apply])).converged


def test_an_expired_grant_still_held_is_revoked_at_its_time_without_a_new_version():
    assert run(deployed()).converged
    later = datetime(2026, 12, 4, 0, 0, 1, tzinfo=UTC)
    decision = run(deployed(), later)
    assert [(s.drift.kind, s.operation.op, s.operation.target) for s in decision.apply] == [
        ("expired_grant_present", "remove_data", "crm")]


def test_enforcement_modes_route_drift():
    spec = {**SPEC, "enforcement": {"default": "correct", "config": "log",
                                    "actions": "escalate", "behaviour": "block"}}
    decision = decide(spec, bad_deployment(), NOW, agent="a", generation=1)
    assert decision.apply == []
    assert [d.kind for d in decision.log] == ["data_widened", "tool_added"]
    assert [(d.kind, reason) for d, reason in decision.escalate] == [
        ("action_limit_missing", "enforcement mode escalate for actions")]
    blocking = {**SPEC, "enforcement": {"default": "block", "config": "block",
                                        "actions": "block", "behaviour": "block"}}
    assert len(decide(blocking, bad_deployment(), NOW, agent="a", generation=1).block) == 3


def test_shadow_records_what_would_change_and_applies_nothing():
    decision = run(bad_deployment(), hold_applied=True)
    assert decision.apply == [] and len(decision.shadow) == 3


def test_under_shadow_or_the_breaker_a_block_is_recorded_once_and_not_applied():
    blocking = {**SPEC, "enforcement": {"default": "block"}}
    held = decide(blocking, bad_deployment(), NOW, agent="refund-agent", generation=1,
                  hold_applied=True)
    assert held.block == [] and held.apply == []
    assert [step.operation.to_dict() for step in held.shadow] == [
        {"op": "suspend", "target": "agent", "value": None}]
    applied = decide(blocking, bad_deployment(), NOW, agent="refund-agent", generation=1)
    assert len(applied.block) == 3 and applied.shadow == []


def test_lagging_reads_wait_instead_of_reapplying_then_retry_then_escalate():
    drifted = run(bad_deployment())
    views = {s.drift.fingerprint: FindingView(s.drift.fingerprint, "correcting", 1, 1,
                                              applied_at=NOW) for s in drifted.apply}
    waiting = run(bad_deployment(), NOW + timedelta(seconds=5), findings=views)
    assert waiting.apply == [] and len(waiting.waiting) == 3  # stale read: no oscillation
    retry = run(bad_deployment(), NOW + timedelta(seconds=61), findings=views)
    assert [s.occurrence for s in retry.apply] == [2, 2, 2]
    assert {s.key for s in retry.apply}.isdisjoint({s.key for s in drifted.apply})
    exhausted = {fp: FindingView(fp, "correcting", 2, 3, applied_at=NOW) for fp in views}
    gave_up = run(bad_deployment(), NOW + timedelta(seconds=61), findings=exhausted)
    assert gave_up.apply == [] and len(gave_up.escalate) == 3
    assert "did not hold after 3 attempts" in gave_up.escalate[0][1]


def test_a_drift_returning_within_the_hold_window_is_a_regression_with_a_new_key():
    first = run(bad_deployment())
    views = {s.drift.fingerprint: FindingView(s.drift.fingerprint, "corrected", 1, 1,
                                              hold_until=NOW + timedelta(minutes=5))
             for s in first.apply}
    again = run(bad_deployment(), NOW + timedelta(minutes=1), findings=views)
    assert len(again.regressed) == 3 and [s.occurrence for s in again.apply] == [2, 2, 2]


def test_findings_no_longer_observed_are_reported_gone():
    first = run(bad_deployment())
    views = {s.drift.fingerprint: FindingView(s.drift.fingerprint, "correcting", 1, 1,
                                              applied_at=NOW) for s in first.apply}
    assert run(deployed(), findings=views).gone == sorted(views)


def test_a_human_ordered_revert_overrides_the_escalate_mode():
    spec = {**SPEC, "enforcement": {"default": "escalate", "config": "escalate",
                                    "actions": "escalate", "behaviour": "block"}}
    drift = decide(spec, bad_deployment(), NOW, agent="a", generation=1).escalate[0][0]
    views = {drift.fingerprint: FindingView(drift.fingerprint, "open", 1, 0,
                                            revert_ordered=True)}
    decision = decide(spec, bad_deployment(), NOW, agent="a", generation=1, findings=views)
    assert [s.drift.fingerprint for s in decision.apply] == [drift.fingerprint]


def test_a_platform_that_keeps_refusing_is_retried_under_the_same_key_then_escalated():
    first = run(bad_deployment())
    # Each failed pass leaves the findings open with one more attempt counted.
    failed_once = {s.drift.fingerprint: FindingView(s.drift.fingerprint, "open", 1, 1)
                   for s in first.apply}
    retry = run(bad_deployment(), findings=failed_once)
    assert [s.key for s in retry.apply] == [s.key for s in first.apply]  # nothing new applied
    assert [s.attempt for s in retry.apply] == [2, 2, 2]
    exhausted = {fp: FindingView(fp, "open", 1, 3) for fp in failed_once}
    gave_up = run(bad_deployment(), findings=exhausted)
    assert gave_up.apply == [] and len(gave_up.escalate) == 3
    assert {reason for _, reason in gave_up.escalate} == {
        "correction failed at the platform 3 times"}
    # A revert a human orders starts again from attempt one.
    ordered = {fp: FindingView(fp, "open", 1, 0, revert_ordered=True) for fp in failed_once}
    assert [s.attempt for s in run(bad_deployment(), findings=ordered).apply] == [1, 1, 1]
