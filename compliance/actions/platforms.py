"""A stop reaches the platforms: each agent it suspended is suspended there through its
connector (and resumed once the stop is lifted), with an audit row per agent. The control
plane's own refusal does not wait for this: decisions and desired-state answers changed when
the stop committed. A connector that fails is recorded; the agent's next pass brings its
platform along (its desired state says `running: false`)."""

import logging

from django.db import transaction

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.choices import AuditAction
from compliance.models import Stop
from compliance.stops import active_stops, stop_covering
from reconciliation.choices import Trigger
from reconciliation.connectors import ConnectorError, connector_for
from reconciliation.controller.triggers import request_reconcile
from reconciliation.reconciler.diff import Operation, OperationKind
from reconciliation.reconciler.plan import idempotency_key
from registry.choices import Lifecycle
from registry.models import Agent

log = logging.getLogger(__name__)


def _apply(stop: Stop, agents: list[Agent], kind: OperationKind,
           action: AuditAction) -> dict[str, list[str]]:
    done: list[str] = []
    failed: list[str] = []
    operation = Operation(kind, "agent")
    for agent in agents:
        key = idempotency_key(agent.name, agent.generation, operation, -int(stop.pk))
        try:
            outcome = connector_for(agent).apply(agent, operation.to_dict(), key)
        except ConnectorError as error:
            log.warning("stop %s: %s on %s's platform failed: %s", stop.pk, kind, agent.name,
                        error)
            failed.append(agent.name)
            outcome, problem = "failed", str(error)[:500]
        else:
            done.append(agent.name)
            problem = ""
        with transaction.atomic():
            audit.record(actor=SYSTEM, action=action, target=f"agent:{agent.name}",
                         agent=agent.name, after={"stop": stop.pk, "operation": str(kind),
                                                  "outcome": str(outcome)},
                         reason=problem or f"stop {stop.pk}: {stop.describe()}")
            if kind == OperationKind.RESUME or problem:
                request_reconcile(agent.pk, Trigger.MANUAL)
    return {"done": done, "failed": failed}


def suspend_on_platforms(stop_id: int) -> dict[str, list[str]]:
    """Suspend through its connector each agent a stop in force reaches."""
    stop = Stop.objects.select_related("stopped_by", "owner").filter(pk=stop_id).first()
    if stop is None or not stop.active:
        return {"done": [], "failed": []}
    agents = [a for a in Agent.objects.filter(name__in=stop.agents, active_version__isnull=False,
                                              lifecycle=Lifecycle.SUSPENDED).order_by("name")]
    return _apply(stop, agents, OperationKind.SUSPEND, AuditAction.STOP_ENFORCED)


def release_on_platforms(stop_id: int) -> dict[str, list[str]]:
    """Resume through its connector each agent a lifted stop had suspended and that runs
    again here (not held by another stop, a block or a human's suspension)."""
    stop = Stop.objects.select_related("stopped_by", "owner").filter(pk=stop_id).first()
    if stop is None or stop.active:
        return {"done": [], "failed": []}
    others = active_stops()
    agents = [a for a in Agent.objects.select_related("owner").filter(
        name__in=stop.agents, active_version__isnull=False, lifecycle=Lifecycle.ACTIVE
    ).order_by("name") if stop_covering(a, others) is None]
    return _apply(stop, agents, OperationKind.RESUME, AuditAction.STOP_RELEASED)
