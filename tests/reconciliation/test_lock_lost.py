"""A pass that loses its lock (it expired while a platform was slow, and another worker took
it) stops before its next change on the platform: two workers never correct one agent at once.
The next pass, run by the holder, decides afresh and finishes the work, no change applied
twice."""

import django_rq

from audit.models import AuditEntry
from reconciliation.controller import handler, work_queue
from sandbox import actions as sandbox_actions
from sandbox.connector import SandboxConnector
from sandbox.models import SandboxAgent
from tests.conftest import BAD_DEPLOYMENT, approved_agent

OTHER_WORKER = "token-of-another-worker"


def test_a_pass_that_loses_its_lock_stops_before_its_next_change(
        people, redis_client, monkeypatch):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    assert handler.reconcile_agent(agent.pk, "approved") == "converged"
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="a bad deployment: three changes to undo")
    before = SandboxAgent.objects.get(agent=agent).apply_count
    connection = django_rq.get_queue("reconcile").connection
    lock = work_queue.LOCK_KEY.format(agent_id=agent.pk)
    apply = SandboxConnector.apply

    def slow_platform(self, target, operation, key):
        """The platform answers the first change so late that the lock lapsed and another
        worker took it."""
        outcome = apply(self, target, operation, key)
        connection.set(lock, OTHER_WORKER)
        return outcome

    monkeypatch.setattr(SandboxConnector, "apply", slow_platform)
    assert handler.reconcile_agent(agent.pk, "observation") == "lock lost"
    assert SandboxAgent.objects.get(agent=agent).apply_count == before + 1  # one, then stop
    assert connection.get(lock).decode() == OTHER_WORKER  # the other worker's lock is kept

    monkeypatch.setattr(SandboxConnector, "apply", apply)
    assert handler.reconcile_agent(agent.pk, "resync") == "busy"  # the other worker holds it
    connection.delete(lock)  # its pass ends
    assert handler.reconcile_agent(agent.pk, "resync") in ("corrected", "converged")
    row = SandboxAgent.objects.get(agent=agent)
    applied = row.applied_keys[-(row.apply_count - before):]
    assert len(applied) == len(set(applied)) == 3  # every change once, none lost
    assert AuditEntry.objects.filter(action="correction.applied", agent=agent.name).count() == 3

