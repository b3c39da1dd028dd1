"""The reconciler's properties over random desired and observed states (hypothesis), both as
the pure decision and as real passes against the sandbox platform: one pass converges, the
next changes nothing, the resync then finds nothing to do, and a crash after any k of the n
changes is finished by the next pass with no change applied twice."""

import itertools
from datetime import UTC, datetime

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from reconciliation import actions
from reconciliation.connectors import SimulatedCrash
from reconciliation.reconciler.diff import apply_operations, effective_desired
from reconciliation.reconciler.plan import decide
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import approved_agent
from tests.reconciliation.test_diff import desired_specs, observed_states

NOW = datetime(2026, 6, 1, tzinfo=UTC)
CORRECT = {"default": "correct", "config": "correct", "actions": "correct",
           "behaviour": "correct"}


@st.composite
def desired_and_actual(draw: st.DrawFn) -> tuple[dict, dict]:
    """A spec corrected in every area, and an observation: unrelated, or the spec's own state
    with a few keys changed."""
    desired = {**draw(desired_specs()), "enforcement": CORRECT}
    observed = draw(observed_states)
    if draw(st.booleans()):
        return desired, observed
    converged = effective_desired(desired, NOW)
    del converged["enforcement"]
    return desired, {**converged, **observed}


def decision(desired: dict, actual: dict):
    return decide(desired, actual, NOW, agent="refund-agent", generation=1)


@settings(max_examples=300, deadline=None)
@given(pair=desired_and_actual(), data=st.data())
def test_one_decision_converges_and_a_crash_after_k_changes_repeats_none(pair, data):
    desired, actual = pair
    first = decision(desired, actual)
    assert first.escalate == [] and first.block == []
    converged = apply_operations(actual, [s.operation for s in first.apply])
    again = decision(desired, converged)
    assert again.converged and again.apply == []

    k = data.draw(st.integers(0, len(first.apply)), label="changes before the crash")
    partial = apply_operations(actual, [s.operation for s in first.apply[:k]])
    second = decision(desired, partial)
    done = {s.key for s in first.apply[:k]}
    assert {s.key for s in second.apply} <= {s.key for s in first.apply[k:]}
    assert not done & {s.key for s in second.apply}  # nothing applied twice
    finished = apply_operations(partial, [s.operation for s in second.apply])
    assert decision(desired, finished).converged


# --- real passes on the sandbox platform -----------------------------------------------------

NAMES = (f"prop-agent-{i:04d}" for i in itertools.count())

sandbox_states = st.fixed_dictionaries({}, optional={
    "model": st.sampled_from(["gpt-4.1", "gpt-4o"]),
    "version": st.sampled_from(["2.3.0", "2.4.0"]),
    "tools": st.lists(st.sampled_from(["orders.lookup", "payments.refund", "crm.search",
                                       "shell.exec"]), max_size=4, unique=True),
    "data": st.lists(st.fixed_dictionaries({
        "resource": st.sampled_from(["orders_db", "payments", "crm", "customers_db"]),
        "access": st.sampled_from(["read", "write", "admin"])}), max_size=4),
    "actions": st.dictionaries(st.sampled_from(["payments.refund", "orders.lookup"]),
                               st.fixed_dictionaries({"approval_above": st.integers(0, 9000),
                                                      "max": st.integers(0, 9000)}),
                               max_size=2),
    "running": st.booleans(),
})


@pytest.mark.django_db
# Examples share the test's transaction, so earlier examples' drift would count towards the
# fleet's circuit breaker (tested on its own in test_breaker_scopes.py): out of reach here.
@override_settings(BREAKER_MIN_AGENTS=10**6, BREAKER_SCOPE_MIN_DRIFTING=10**6)
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(changes=sandbox_states, data=st.data())
def test_real_passes_converge_then_idle_and_a_crash_repeats_no_change(people, changes, data):
    agent = approved_agent(people, next(NAMES), enforcement={"default": "correct"})
    _crash_then_converge(agent, changes, data)


def _crash_then_converge(agent, changes: dict, data: st.DataObject) -> None:
    actions.reconcile_agent(agent.pk, trigger="approved")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=changes, reason="random")
    row = SandboxAgent.objects.get(agent=agent)
    planned = decide(agent.active_version.spec, row.state, datetime.now(UTC), agent=agent.name,
                     generation=agent.generation).apply
    k = data.draw(st.integers(0, max(0, len(planned) - 1)), label="changes before the crash")
    if planned:
        sandbox_actions.sandbox_faults(agent, actor="system:test", fault="crash", after_changes=k)
        with pytest.raises(SimulatedCrash):
            actions.reconcile_agent(agent.pk, trigger="observation")
        assert SandboxAgent.objects.get(agent=agent).apply_count == row.apply_count + k

    run = actions.reconcile_agent(agent.pk, trigger="observation")
    assert run.result in ("converged", "corrected")
    row_after = SandboxAgent.objects.get(agent=agent)
    applied = row_after.applied_keys[-(row_after.apply_count - row.apply_count):] if (
        row_after.apply_count > row.apply_count) else []
    assert len(applied) == len(set(applied)) == len(planned)  # each change once, none lost
    assert actions.converged_check([agent.pk]) == []
    idle = actions.reconcile_agent(agent.pk, trigger="resync")
    assert idle.result == "converged" and idle.changes == []
    assert SandboxAgent.objects.get(agent=agent).apply_count == row_after.apply_count


# --- the same on real workers, one killed with SIGKILL mid-pass ------------------------------

WORKER_ENV = {"SANDBOX_CRASH_KILLS_PROCESS": "true", "RECONCILE_LOCK_SECONDS": "5",
              "BREAKER_MIN_AGENTS": str(10**6), "BREAKER_SCOPE_MIN_DRIFTING": str(10**6)}


@pytest.mark.timeout(1200)
@override_settings(BREAKER_MIN_AGENTS=10**6, BREAKER_SCOPE_MIN_DRIFTING=10**6)
# Each example starts real workers and waits for a lock to lapse: a few examples, no shrinking
# (a failing example is printed as drawn).
@settings(max_examples=4, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(changes=sandbox_states, data=st.data())
def test_a_worker_killed_after_k_of_n_changes_leaves_the_pass_to_the_next(
        people, start_worker, changes, data):
    """The sandbox's injected crash SIGKILLs the worker running the pass after k of its n
    changes (the worker runs jobs in its own process: the whole worker dies, as supervisord
    would see it). A new worker and the periodic resync finish the pass once the dead one's
    lock lapses: every change applied once, nothing left correcting."""
    from reconciliation.jobs import resync
    from reconciliation.models import Finding, ReconcileRun
    from tests.conftest import eventually

    agent = approved_agent(people, next(NAMES), enforcement={"default": "correct"})
    actions.reconcile_agent(agent.pk, trigger="approved")  # converged (its queued job waits)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=changes, reason="random")
    row = SandboxAgent.objects.get(agent=agent)
    planned = decide(agent.active_version.spec, row.state, datetime.now(UTC), agent=agent.name,
                     generation=agent.generation).apply
    k = data.draw(st.integers(0, max(0, len(planned) - 1)), label="changes before the kill")
    if planned:
        sandbox_actions.sandbox_faults(agent, actor="system:test", fault="crash", after_changes=k)
    worker = start_worker(**WORKER_ENV)
    if planned:
        eventually(lambda: worker.process.poll() is not None, timeout=120,
                   message=lambda: f"the worker was not killed:\n{worker.output()}")
        assert worker.process.returncode == -9
        assert SandboxAgent.objects.get(agent=agent).apply_count == row.apply_count + k
        worker = start_worker(**WORKER_ENV)  # what supervisord does

    def finished() -> bool:
        resync()  # the cron's periodic resync: the backstop that re-derives the lost pass
        statuses = set(Finding.objects.filter(agent=agent).values_list("status", flat=True))
        return statuses <= {"corrected", "resolved"} and not actions.converged_check(
            [agent.pk])

    try:
        eventually(finished, timeout=120, interval=1)
    except AssertionError:
        findings = list(Finding.objects.filter(agent=agent).values_list("kind", "status"))
        runs = list(ReconcileRun.objects.filter(agent=agent).values_list("trigger", "result"))
        raise AssertionError(f"the pass was not finished: findings {findings}, runs {runs}; "
                             f"the worker said:\n{worker.output()}") from None
    row_after = SandboxAgent.objects.get(agent=agent)
    applied = row_after.applied_keys[-(row_after.apply_count - row.apply_count):] if (
        row_after.apply_count > row.apply_count) else []
    assert len(applied) == len(set(applied)) == len(planned)  # each change once, none lost
    assert not Finding.objects.filter(agent=agent, status="correcting").exists()
    from tests.conftest import assert_trail_whole

    assert_trail_whole()
    worker.stop()  # the next example's pass must wait for its own workers
