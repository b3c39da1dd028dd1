"""The sandbox platform: deploying agents, external drift and fault injection."""

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config.errors import Invalid
from reconciliation.actions.common import audit_label, desired_now
from reconciliation.attribution import deployment
from reconciliation.choices import (
    Trigger,
)
from reconciliation.controller.triggers import request_reconcile
from registry.models import Agent
from sandbox.models import SandboxAgent


def ensure_sandbox(agent: Agent) -> SandboxAgent:
    """The sandbox platform deploys an agent exactly as approved the first time it is seen."""
    row = SandboxAgent.objects.filter(agent=agent).first()
    if row is not None:
        return row
    state = desired_now(agent, timezone.now())
    state.pop("enforcement", None)
    row, _ = SandboxAgent.objects.get_or_create(agent=agent, defaults={"state": state})
    return row


@transaction.atomic
def sandbox_deploy(agent: Agent, *, actor: Any, changes: dict[str, Any], reason: str,
                   deployment_id: str = "") -> None:
    """External drift: a "deployment" on the simulated platform changes the agent's state.
    One deployment across several agents passes the same `deployment_id` to each (its
    findings are then one incident)."""
    ensure_sandbox(agent)
    row = SandboxAgent.objects.select_for_update(no_key=True).get(agent=agent)
    before = row.state
    row.state = {**row.state, **changes}
    row.last_deployment = deployment(deployment_id or uuid.uuid4().hex[:12],
                                     audit_label(actor), reason)
    row.save(update_fields=["state", "last_deployment"])
    audit.record(actor=actor, action=AuditAction.SANDBOX_CHANGED, target=f"agent:{agent.name}",
                 agent=agent.name, before=before, after=row.state,
                 reason=f"{reason} ({row.last_deployment['key']})")
    request_reconcile(agent.pk, Trigger.OBSERVATION)


@transaction.atomic
def sandbox_faults(agent: Agent, *, actor: Any, fault: str = "", after_changes: int | None = None,
                   lag_seconds: int = 0) -> None:
    """Inject faults: fail or crash after N more changes; lagging reads for K seconds."""
    if fault not in ("", "fail", "crash"):
        raise Invalid("fault must be fail, crash or empty",
                      details=[{"pointer": "/fault", "message": "expected fail or crash"}])
    ensure_sandbox(agent)
    row = SandboxAgent.objects.select_for_update(no_key=True).get(agent=agent)
    before = {"fault": row.fault, "after_changes": row.changes_until_fault,
              "lag_seconds": row.lag_seconds}
    row.fault = fault
    row.changes_until_fault = after_changes if fault else None
    row.lag_seconds = lag_seconds
    row.save(update_fields=["fault", "changes_until_fault", "lag_seconds"])
    audit.record(actor=actor, action=AuditAction.SANDBOX_CHANGED, target=f"agent:{agent.name}",
                 agent=agent.name, before=before,
                 after={"fault": fault, "after_changes": row.changes_until_fault,
                        "lag_seconds": lag_seconds}, reason="fault injection")
