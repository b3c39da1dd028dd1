"""A reconcile pass against the sandbox platform and the database: the refund-agent story,
idempotent re-runs, crash recovery, lagging reads, expiry, and every enforcement mode."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from audit.models import AuditEntry
from audit.verify import verify_trail
from reconciliation import actions
from reconciliation.connectors import SimulatedCrash
from reconciliation.models import (
    AgentStatus,
    AlertEvent,
    BreakerTrip,
    ControlState,
    Correction,
    Escalation,
    Finding,
    ReconcileRun,
)
from reconciliation.reconciler import correct as correct_stage
from registry import actions as registry_actions
from registry.choices import VersionSource
from registry.models import Agent
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import BAD_DEPLOYMENT, refund_manifest, shadow_on

pytestmark = pytest.mark.django_db

def approved_agent(people, **spec) -> Agent:
    spec.setdefault("enforcement", {"default": "correct"})
    (outcome,) = registry_actions.apply_manifests(
        [refund_manifest(**spec)], actor=people.alice, source=VersionSource.YAML)
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    return Agent.objects.get(name="refund-agent")


def sandbox(agent: Agent) -> SandboxAgent:
    return SandboxAgent.objects.get(agent=agent)


def passes(agent: Agent, trigger: str = "manual", now=None) -> ReconcileRun:
    return actions.reconcile_agent(agent.pk, trigger=trigger, now=now)


def test_the_refund_agent_story_detect_correct_verify(people):
    agent = approved_agent(people)
    assert passes(agent, "approved").result == "converged"
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                           reason="bad deployment")
    run = passes(agent, "observation")
    assert run.result == "corrected" and run.drift_found == 3
    assert [(c["op"], c["target"]) for c in run.changes] == [
        ("set_action_limit", "payments.refund"), ("remove_data", "crm"),
        ("remove_tool", "crm.search")]
    state = sandbox(agent).state
    assert "crm.search" not in state["tools"]
    assert all(d["resource"] != "crm" for d in state["data"])
    assert state["actions"]["payments.refund"] == {"approval_above": 500, "max": 5000}
    findings = Finding.objects.filter(agent=agent)
    assert sorted(findings.values_list("kind", "status", "generation")) == [
        ("action_limit_missing", "corrected", 1), ("data_added", "corrected", 1),
        ("tool_added", "corrected", 1)]
    assert all(f.hold_until > timezone.now() for f in findings)
    assert set(Correction.objects.values_list("result", flat=True)) == {"verified"}
    status = AgentStatus.objects.get(agent=agent)
    ready = status.condition("Ready")
    assert (ready["status"], ready["observedGeneration"]) == ("True", 1)
    trail = list(AuditEntry.objects.filter(agent="refund-agent").values_list("action", flat=True))
    assert trail.count("finding.opened") == 3 and trail.count("correction.applied") == 3
    assert trail.count("finding.corrected") == 3 and "reconcile.run" in trail
    # The deployment happened after convergence with no new version: the must-be-zero metric.
    assert ControlState.load().post_convergence_drift == 1
    # Second pass right after: nothing changes.
    count = sandbox(agent).apply_count
    again = passes(agent)
    assert again.result == "converged" and again.changes == []
    assert sandbox(agent).apply_count == count == 3
    assert verify_trail().ok


@pytest.mark.parametrize("crash_after", [0, 1, 2])
def test_a_crash_between_changes_is_finished_by_the_next_pass_without_repeats(people,
                                                                              crash_after):
    agent = approved_agent(people)
    passes(agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="bad")
    sandbox_actions.sandbox_faults(agent, actor="system:test", fault="crash",
                                   after_changes=crash_after)
    with pytest.raises(SimulatedCrash):
        passes(agent)
    assert sandbox(agent).apply_count == crash_after
    run = passes(agent)
    assert run.result == "corrected" and len(run.changes) == 3 - crash_after
    assert sandbox(agent).apply_count == 3  # every change applied exactly once
    assert passes(agent).result == "converged"


def test_drift_is_announced_before_the_pass_plans_around_it_and_a_crash_there_loses_nothing(
        people, monkeypatch):
    """The findings and their `drift.detected` commit first (the watchers hear of the drift
    without waiting on breakers, holds and pending corrections); a crash right after leaves
    open findings, and the next pass corrects them once, announcing nothing twice."""
    agent = approved_agent(people)
    passes(agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="bad")

    def crash(*args, **kwargs):
        raise SimulatedCrash("the worker died after announcing the drift")

    with monkeypatch.context() as patched:
        patched.setattr(correct_stage, "_record", crash)
        with pytest.raises(SimulatedCrash):
            passes(agent, "observation")
    found = Finding.objects.filter(agent=agent)
    assert sorted(found.values_list("status", flat=True)) == ["open", "open", "open"]
    announced = AlertEvent.objects.filter(event="drift.detected")
    assert announced.count() == 1  # the pass's drift, folded into one alert
    assert AuditEntry.objects.filter(action="finding.opened").count() == 3
    assert not Correction.objects.filter(agent=agent).exists()
    assert sandbox(agent).apply_count == 0
    run = passes(agent)
    assert run.result == "corrected" and len(run.changes) == 3
    assert sandbox(agent).apply_count == 3
    assert announced.count() == 1
    assert AuditEntry.objects.filter(action="finding.opened").count() == 3
    assert passes(agent).result == "converged"


def test_a_finding_a_person_moves_after_it_was_announced_gets_no_step_from_that_pass(
        people, monkeypatch):
    """Between the announcement and the pass's next transaction an approver closes one of the
    findings: the pass was planned before that, so it takes no step on that finding (no
    correction made on the platform, no move refused halfway) and finishes the others; the
    next pass decides again from what it then observes."""
    from reconciliation.actions.findings import move_finding

    agent = approved_agent(people)
    passes(agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="bad")
    record = correct_stage._record
    closed = []

    def a_person_acts_first(seen, decision, findings):
        finding = Finding.objects.get(pk=sorted(f.pk for f in findings.values())[0])
        move_finding(finding, "resolved", actor=people.bob, agent=agent,
                     reason="bob closed it while the pass was planning")
        closed.append(finding.pk)
        return record(seen, decision, findings)

    with monkeypatch.context() as patched:
        patched.setattr(correct_stage, "_record", a_person_acts_first)
        run = passes(agent, "observation")
    assert run.result == "corrected" and len(run.changes) == 2
    assert sandbox(agent).apply_count == 2
    assert Finding.objects.get(pk=closed[0]).status == "resolved"
    assert not Correction.objects.filter(finding_id=closed[0]).exists()
    # The drift is still there: the next pass reopens it and corrects it.
    assert passes(agent).result == "corrected"
    assert sandbox(agent).apply_count == 3
    assert passes(agent).result == "converged"


def test_a_failing_platform_fails_the_pass_cleanly_and_the_next_one_finishes(people):
    from reconciliation.connectors import ConnectorError

    agent = approved_agent(people)
    passes(agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    sandbox_actions.sandbox_faults(agent, actor="system:test", fault="fail", after_changes=1)
    with pytest.raises(ConnectorError):
        passes(agent)
    failed = ReconcileRun.objects.filter(agent=agent).latest("pk")
    assert failed.result == "failed" and "sandbox failure injected" in failed.error
    assert AgentStatus.objects.get(agent=agent).condition("Ready")["reason"] == "ReconcileFailed"
    assert passes(agent).result == "corrected"
    assert sandbox(agent).apply_count == 3


def test_lagging_reads_do_not_make_the_loop_oscillate(people):
    agent = approved_agent(people)
    passes(agent)
    sandbox_actions.sandbox_faults(agent, actor="system:test", lag_seconds=30)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    first = passes(agent)
    assert first.result == "correcting" and len(first.changes) == 3
    # The platform still shows the old state: the loop waits instead of re-applying.
    for _ in range(3):
        assert passes(agent).changes == []
    assert sandbox(agent).apply_count == 3
    SandboxAgent.objects.filter(agent=agent).update(stale_until=timezone.now())
    assert passes(agent).result == "converged"
    assert set(Finding.objects.filter(agent=agent).values_list("status", flat=True)) == {
        "corrected"}
    assert sandbox(agent).apply_count == 3


def test_a_grant_is_revoked_at_its_expiry_without_any_new_proposal(people):
    expires = timezone.now() + timedelta(hours=1)
    agent = approved_agent(people, grants=[{
        "resource": "crm", "access": "read", "reason": "Q4 audit",
        "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}])
    passes(agent)
    assert {"resource": "crm", "access": "read"} in sandbox(agent).state["data"]
    versions = agent.versions.count()
    run = passes(agent, "grant_expired", now=expires + timedelta(seconds=1))
    assert [(c["op"], c["target"]) for c in run.changes] == [("remove_data", "crm")]
    assert all(d["resource"] != "crm" for d in sandbox(agent).state["data"])
    assert agent.versions.count() == versions


def test_after_a_new_version_converges_outside_drift_still_counts_and_resync_skips_it(people):
    agent = approved_agent(people)
    passes(agent, "approved")
    outcome = registry_actions.propose(
        agent, {**agent.active_version.spec, "tools": [*agent.active_version.spec["tools"],
                                                         "orders.cancel"]},
        agent.active_version.metadata, actor=people.alice, source=VersionSource.API)
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    agent.refresh_from_db()
    assert passes(agent, "approved").result == "corrected"  # generation 2 rolled out
    status = AgentStatus.objects.get(agent=agent)
    assert (status.converged, status.converged_generation) == (True, 2)
    assert actions.converged_check([agent.pk]) == []  # the cheap path, not a full pass
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    passes(agent, "observation")
    assert ControlState.load().post_convergence_drift == 1


def test_shadow_mode_records_and_applies_nothing(people):
    agent = approved_agent(people)
    passes(agent)
    shadow_on(people, agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    run = passes(agent)
    assert run.shadow and run.changes == [] and run.result == "drifted"
    assert sandbox(agent).apply_count == 0
    assert Correction.objects.filter(result="shadow").count() == 3
    assert AuditEntry.objects.filter(action="correction.shadowed").count() == 3


def test_shadow_mode_does_not_suspend_a_blocking_agent_either(people):
    agent = approved_agent(people, enforcement={"default": "block"})
    passes(agent)
    shadow_on(people, agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    run = passes(agent)
    assert run.changes == [] and sandbox(agent).apply_count == 0
    agent.refresh_from_db()
    assert agent.lifecycle == "active" and sandbox(agent).state["running"] is True
    (shadowed,) = Correction.objects.filter(result="shadow")
    assert shadowed.operation == {"op": "suspend", "target": "agent", "value": None}
    assert passes(agent).changes == [] and Correction.objects.count() == 1  # recorded once


def test_block_suspends_the_agent_through_its_connector_until_a_human_clears_it(people):
    agent = approved_agent(people, enforcement={"default": "block"})
    passes(agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    run = passes(agent)
    assert [c["op"] for c in run.changes] == ["suspend"]
    agent.refresh_from_db()
    assert agent.lifecycle == "suspended" and sandbox(agent).state["running"] is False
    assert set(Finding.objects.filter(agent=agent).values_list("status", flat=True)) == {
        "blocked"}
    assert AgentStatus.objects.get(agent=agent).condition("Suspended")["status"] == "True"
    assert passes(agent).changes == []  # stays blocked: nothing more until a human acts
    actions.resume_agent(agent, actor=people.bob, reason="deployment rolled back by hand")
    agent.refresh_from_db()
    assert agent.lifecycle == "active"


def test_escalate_opens_one_escalation_per_finding_for_an_approver(people):
    agent = approved_agent(people, enforcement={"default": "correct", "actions": "escalate"})
    passes(agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    passes(agent)
    passes(agent)
    (escalation,) = Escalation.objects.filter(agent=agent)
    assert escalation.finding.kind == "action_limit_missing" and escalation.status == "open"
    assert escalation.finding.status == "escalated"
    assert sandbox(agent).state["actions"]["payments.refund"] == {"max": 5000}
    # bob orders a revert: the loop restores the $500 rule.
    actions.resolve_escalation(escalation.pk, actor=people.bob, resolution="revert",
                               comment="the threshold is policy")
    passes(agent, "escalation")
    assert sandbox(agent).state["actions"]["payments.refund"] == {
        "approval_above": 500, "max": 5000}
    assert Finding.objects.get(pk=escalation.finding_id).status == "corrected"


def test_log_records_the_drift_and_why_it_was_allowed(people):
    agent = approved_agent(people, enforcement={"default": "log"})
    passes(agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    run = passes(agent)
    assert run.changes == [] and run.result == "drifted"
    logged = Finding.objects.filter(agent=agent)
    assert set(logged.values_list("status", flat=True)) == {"logged"}
    assert logged.first().reason == "allowed: enforcement mode log for config" or (
        logged.first().reason == "allowed: enforcement mode log for actions")


def test_the_breaker_pauses_automatic_correction_when_too_many_agents_drift(people, settings):
    settings.BREAKER_MIN_AGENTS = 2
    settings.BREAKER_SHARE_PERCENT = 40
    settings.BREAKER_SCOPE_MIN_DRIFTING = 1
    first = approved_agent(people)
    doc = refund_manifest(enforcement={"default": "correct"})
    object.__setattr__(doc, "name", "second-agent")
    (outcome,) = registry_actions.apply_manifests([doc], actor=people.alice, source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    second = Agent.objects.get(name="second-agent")
    for agent in (first, second):
        passes(agent)
        sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                       reason="bad")
    passes(first)  # 1 of alice's 2 agents drifted: 50% > 40%: her breaker trips
    (trip,) = BreakerTrip.objects.all()
    assert trip.scope == "owner:alice" and "1 of 2 agents" in trip.reason
    assert ControlState.load().breaker_tripped_at is None  # one owner never trips the cluster's
    run = passes(second)
    assert run.changes == [] and sandbox(second).apply_count == 0
    actions.reset_breaker(actor=people.dana, reason="bad deploy understood",
                          scope="owner:alice")
    assert passes(second).result == "corrected"


def test_metrics_show_passes_drift_corrections_time_to_verify_and_the_zero_counter(people,
                                                                                 client):
    agent = approved_agent(people)
    passes(agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    passes(agent)
    text = client.get("/metrics").content.decode()
    assert 'reconcile_passes_total{result="converged"} 1.0' in text
    assert 'reconcile_passes_total{result="corrected"} 1.0' in text
    assert 'drift_findings_total{kind="tool_added",severity="medium"} 1.0' in text
    assert 'corrections_total{result="verified"} 3.0' in text
    assert 'drift_to_verified_seconds_bucket{le="+Inf"} 3.0' in text
    assert 'drift_to_verified_seconds_bucket{le="60.0"} 3.0' in text
    (total,) = [float(line.split()[-1]) for line in text.splitlines()
                if line.startswith("drift_to_verified_seconds_sum ")]
    assert total > 0  # time passed between detection and verification
    assert "post_convergence_drift_total 1.0" in text
    assert "breaker_tripped 0.0" in text


def test_the_agent_page_shows_conditions_observed_state_findings_and_runs(people, client):
    agent = approved_agent(people)
    passes(agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    passes(agent)
    client.force_login(people.dana)
    body = client.get("/agents/refund-agent/").content.decode()
    for text in ("Ready", "Converged", "action_limit_missing", "/actions/payments.refund",
                 "remove_tool", "corrected", "observation", "Observed state"):
        assert text in body, text


def test_a_drift_that_keeps_coming_back_regresses_and_then_goes_to_a_human(people, settings):
    settings.RECONCILE_MAX_ATTEMPTS = 2
    agent = approved_agent(people)
    passes(agent)
    changes = {"tools": ["crm.search", "orders.lookup", "payments.refund"]}
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=changes, reason="deploy 1")
    assert passes(agent).result == "corrected"
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=changes, reason="deploy 2")
    run = passes(agent)
    finding = Finding.objects.get(agent=agent)
    assert (run.result, finding.status, finding.occurrence) == ("corrected", "corrected", 2)
    assert len({c.idempotency_key for c in Correction.objects.filter(finding=finding)}) == 2
    assert AuditEntry.objects.filter(action="finding.regressed").count() == 1
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=changes, reason="deploy 3")
    passes(agent)
    finding.refresh_from_db()
    assert finding.status == "escalated"
    assert "drift came back after 2 corrections" in Escalation.objects.get().reason
    assert sandbox(agent).apply_count == 2


# --- the reconciler's own contract: reconcile(agent_id) -> Result(run, requeue_after) ---------


def test_reconcile_returns_its_run_and_when_its_controller_should_come_back(people):
    """No queue involved: exact changes, a second pass that changes nothing, and the grant's
    end as the requeue (the controller turns it into a pass at that time)."""
    from reconciliation.reconciler.passes import reconcile

    expires = timezone.now() + timedelta(hours=1)
    agent = approved_agent(people, grants=[{
        "resource": "crm", "access": "read", "reason": "Q4 audit",
        "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}])
    first = reconcile(agent.pk, trigger="approved")
    assert first.run.result == "converged"
    assert first.requeue_trigger == "grant_expired"
    assert first.run.started_at + first.requeue_after == expires.replace(microsecond=0)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes={
        "tools": ["crm.search", "orders.lookup", "payments.refund"]}, reason="bad")
    fixed = reconcile(agent.pk, trigger="observation")
    assert [(c["op"], c["target"]) for c in fixed.run.changes] == [("remove_tool", "crm.search")]
    assert fixed.run.result == "corrected"
    again = reconcile(agent.pk, trigger="resync")
    assert again.run.result == "converged" and again.run.changes == []
    assert sandbox(agent).apply_count == 1
    late = reconcile(agent.pk, trigger="grant_expired", now=expires + timedelta(seconds=1))
    assert [(c["op"], c["target"]) for c in late.run.changes] == [("remove_data", "crm")]
    assert late.requeue_after is None  # nothing left to wait for


def test_a_correction_not_seen_yet_is_a_verify_requeue(people):
    from reconciliation.reconciler.passes import reconcile

    agent = approved_agent(people)
    reconcile(agent.pk, trigger="approved")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes={
        "tools": ["crm.search", "orders.lookup", "payments.refund"]}, reason="bad")
    sandbox_actions.sandbox_faults(agent, actor="system:test", lag_seconds=60)
    result = reconcile(agent.pk, trigger="observation")
    assert result.run.result == "correcting"
    assert result.requeue_trigger == "verify" and result.requeue_after == timedelta(
        seconds=settings.RECONCILE_VERIFY_DELAY_SECONDS)


@pytest.mark.django_db(transaction=True)  # each transaction of the pass is its own, as on a worker
def test_a_converged_agents_pass_is_cheap_and_never_locks_the_cluster_row(people):
    """The pass every resync of a converged fleet runs: a bounded number of queries, and no
    FOR UPDATE on the one ControlState row every agent's pass shares."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    agent = approved_agent(people)
    passes(agent, "approved")
    with CaptureQueriesContext(connection) as queries:
        assert passes(agent, "observation").result == "converged"
    control = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT")  # not queries
    sql = [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(control)]
    table = ControlState._meta.db_table
    assert not [q for q in sql if table in q and "FOR UPDATE" in q], sql
    assert len(sql) <= 20, "\n".join(q[:150] for q in sql)


def test_a_drifted_pass_announces_its_drift_within_a_bounded_number_of_queries(people):
    """PUT → drift.detected is mostly the pass's own round trips before its findings commit:
    the read of what it judges and the findings, none of the breakers, holds and pending
    corrections that come after."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    agent = approved_agent(people)
    passes(agent, "approved")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="bad deployment")
    with CaptureQueriesContext(connection) as queries:
        assert passes(agent, "observation").result == "corrected"
    sql = [q["sql"] for q in queries.captured_queries]
    opened = next(i for i, q in enumerate(sql) if q.startswith(
        f'INSERT INTO "{Finding._meta.db_table}"'))
    announced = next(i for i, q in enumerate(sql) if i > opened and q.startswith(
        "RELEASE SAVEPOINT"))  # the findings' transaction ends (a savepoint in this test)
    control = ("SAVEPOINT", "RELEASE SAVEPOINT")  # not queries
    before = [q for q in sql[:announced] if not q.startswith(control)]
    listing = "\n".join(q[:150] for q in before)
    after = ("compliance_maintenancewindow", f'INSERT INTO "{Correction._meta.db_table}"',
             "COUNT(")  # the window's holds, pending corrections, the breakers' counts
    assert not [q for q in before if any(what in q for what in after) or (
        ControlState._meta.db_table in q and "FOR UPDATE" in q)], listing
    # the read and the platform's state recorded (~20), then each of the 3 findings with its
    # audit row and alert: ~6 each on PostgreSQL, where the audit row is queued for the
    # sequencer; 10 on SQLite, where it is chained in place (head, tree nodes, entry, head)
    per_finding = 6 if connection.vendor == "postgresql" else 10
    assert len(before) <= 20 + per_finding * 3, listing
