"""The demo cluster and the drift lab: what `make demo` seeds, and what the lab injects."""

import pytest
from django.core.management import CommandError, call_command

from audit.verify import verify_trail
from reconciliation import actions
from reconciliation.models import ControlState, Correction, Escalation, Finding, ReconcileRun
from registry.models import Agent, DesiredStateVersion, Guardrail
from tests.conftest import eventually


def test_seed_demo_registers_forty_approved_agents_and_the_three_guardrails(db, capsys,
                                                                           settings, tmp_path):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", "--force")
    assert Agent.objects.count() == 40
    assert set(Agent.objects.values_list("generation", flat=True)) == {1}
    assert set(Agent.objects.values_list("owner__username", flat=True)) == {
        "alice", "erin", "frank"}
    assert len(set(Agent.objects.values_list("framework", flat=True))) >= 4
    assert sorted(Guardrail.objects.values_list("name", flat=True)) == [
        "crm-write-needs-two-approvers", "grants-expire-within-90-days",
        "refund-threshold-at-most-1000"]
    crm = Agent.objects.get(name="crm-enricher").active_version
    assert crm.required_approvals == 2 and crm.approvals.count() == 2
    assert_history()
    runs = ReconcileRun.objects.count()
    call_command("seed_demo", "--force")  # idempotent
    assert Agent.objects.count() == 40
    assert ReconcileRun.objects.count() == runs
    assert_history()
    with pytest.raises(CommandError, match="DEBUG"):
        settings.DEBUG = False
        call_command("seed_demo")


def assert_history() -> None:
    """What a new user finds: real passes, three corrections verified, one drift escalated,
    one proposal pending; every other agent converges in the worker (the pass its approval
    queued: test_a_mass_bad_deployment_trips_the_breaker_on_real_workers waits for it)."""
    corrected = set(Finding.objects.filter(status="corrected")
                    .values_list("agent__name", flat=True))
    assert corrected == {"support-triage", "payments-agent-00", "support-agent-02"}
    assert set(Correction.objects.values_list("result", flat=True)) == {"verified"}
    escalated = Escalation.objects.filter(status="open")
    assert {(e.agent.name, e.finding.kind) for e in escalated} == {
        ("finance-agent-01", "tool_added"), ("finance-agent-01", "data_added")}
    waiting = set(Agent.objects.filter(status__converged=False).values_list("name", flat=True))
    assert "finance-agent-01" in waiting  # its drift waits for an approver
    assert not waiting & corrected  # the corrected three converged again at seeding
    (proposal,) = DesiredStateVersion.objects.filter(state="pending")
    assert proposal.agent.name == "refund-agent" and "orders.cancel" in proposal.spec["tools"]
    assert not ControlState.load().breaker_tripped_at
    assert verify_trail().ok


def test_the_lab_plays_the_bad_deployment_and_the_loop_corrects_it(db, settings, tmp_path,
                                                                   capsys):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", "--force")
    agent = Agent.objects.get(name="refund-agent")
    actions.reconcile_agent(agent.pk, trigger="approved")
    call_command("lab", "drift", "refund-agent")
    assert "bad deployment" in capsys.readouterr().out
    run = actions.reconcile_agent(agent.pk, trigger="observation")
    assert run.result == "corrected"
    assert {f.kind for f in Finding.objects.filter(agent=agent)} == {
        "tool_added", "data_added", "action_limit_missing"}
    with pytest.raises(CommandError, match="no agent"):
        call_command("lab", "drift", "ghost")


def test_a_mass_bad_deployment_trips_the_breaker_on_real_workers(start_worker, settings,
                                                                 tmp_path, capsys):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", "--force")
    worker = start_worker()
    # All but finance-agent-01, whose seeded drift waits for an approver.
    eventually(lambda: Agent.objects.filter(status__converged=True).count() == 39, timeout=90,
               message=lambda: f"the demo never converged; worker said:\n{worker.output()}")
    call_command("lab", "mass", "12")
    eventually(lambda: ControlState.load().breaker_tripped_at is not None, timeout=60,
               message=lambda: f"the breaker did not trip; worker said:\n{worker.output()}")
    control = ControlState.load()
    assert "automatic correction paused" in control.breaker_reason
    # Some drift is left in place for a human instead of a mass revocation storm.
    eventually(lambda: Finding.objects.filter(status="open").exists(), timeout=30)


def test_the_simulator_drifts_a_random_sandbox_agent(db, settings, tmp_path, capsys):
    import random

    from sandbox.lab import simulate
    from sandbox.models import SandboxAgent

    settings.VAR_DIR = tmp_path
    call_command("seed_demo", "--force")
    said = simulate(rng=random.Random(3))
    name = said.split(":")[0]
    assert "crm.search" in SandboxAgent.objects.get(agent__name=name).state["tools"]
