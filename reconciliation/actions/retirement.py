"""A retired agent, as the loop sees it: marked retired (never "in policy" again) and stopped
on its platform through its connector, by a job retried with the loop's backoff; when the
platform cannot be asked, the approvers get an escalation. The registry announces the
retirement (registry.signals.agent_retired); reconciliation/receivers.py answers it here."""

from django.db import transaction

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.choices import AuditAction
from config import queues
from reconciliation.actions.escalations import open_escalation
from reconciliation.choices import Health
from reconciliation.connectors import connector_for
from reconciliation.models import AgentStatus
from reconciliation.reconciler.diff import Operation, OperationKind
from reconciliation.reconciler.plan import idempotency_key
from registry.models import Agent


def retired(agent_id: int) -> None:
    """Inside the retirement's transaction: the agent's health says retired (on its page,
    lists and the counts), and after commit a job asks its platform to stop it."""
    AgentStatus.objects.update_or_create(agent_id=agent_id, defaults={"health": Health.RETIRED})
    transaction.on_commit(lambda: queues.queue("reconcile").enqueue(
        "reconciliation.jobs.stop_retired_agent", agent_id), robust=True)


def stop_on_platform(agent_id: int) -> str:
    """Ask a retired agent's platform to stop it through its connector (a job, after the
    retirement committed); the key makes a repeated request a no-op at the platform."""
    agent = Agent.objects.get(pk=agent_id)
    operation = Operation(OperationKind.SUSPEND, "agent")  # a ConnectorError: the job retries
    key = idempotency_key(agent.name, agent.generation, operation, 0)  # 0: retirement's own
    outcome = connector_for(agent).apply(agent, operation.to_dict(), key)
    audit.record(actor=SYSTEM, action=AuditAction.AGENT_STOPPED, target=f"agent:{agent.name}",
                 agent=agent.name, after={**operation.to_dict(), "key": key, "outcome": outcome},
                 reason="retired: its platform was asked to stop it")
    return outcome


@transaction.atomic
def stop_failed(agent_id: int, *, error: str, attempts: int) -> None:
    """The platform could not be asked to stop a retired agent after every retry: audited, and
    an escalation asks the approvers to stop it by hand."""
    agent = Agent.objects.get(pk=agent_id)
    why = (f"retired, but its platform could not be asked to stop it after {attempts} "
           f"attempts ({error}): stop it by hand")
    audit.record(actor=SYSTEM, action=AuditAction.AGENT_STOP_FAILED,
                 target=f"agent:{agent.name}", agent=agent.name,
                 after={"attempts": attempts, "error": error}, reason=why)
    open_escalation(agent, None, reason=why)
