"""Recording what an agent reports or a connector reads."""

from typing import Any

from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from reconciliation.actions.common import audit_label, state_hash
from reconciliation.choices import (
    Trigger,
)
from reconciliation.models import (
    ObservedState,
)
from reconciliation.triggers import request_reconcile
from registry.models import Agent


@transaction.atomic
def record_observation(agent: Agent, state: dict[str, Any], *, actor: Any, source: str,
                       trigger_reconcile: bool = True) -> tuple[ObservedState, bool]:
    """Store an observed state; only a changed state is a new history row (a heartbeat just
    moves last_seen_at). Queues a reconcile after commit. Returns (row, changed)."""
    now = timezone.now()
    digest = state_hash(state)
    latest = (ObservedState.objects.select_for_update().filter(agent=agent)
              .order_by("-observed_at").first())
    if latest is not None and latest.state_sha256 == digest:
        latest.last_seen_at = now
        latest.save(update_fields=["last_seen_at"])
        row, changed = latest, False
    else:
        row = ObservedState.objects.create(agent=agent, state=state, state_sha256=digest,
                                           source=source, reported_by=audit_label(actor),
                                           observed_at=now, last_seen_at=now)
        audit.record(actor=actor, action=AuditAction.OBSERVATION_RECORDED,
                     target=f"agent:{agent.name}", agent=agent.name,
                     before=latest.state if latest else None, after=state,
                     reason=f"reported through {source}")
        changed = True
    if trigger_reconcile:
        request_reconcile(agent.pk, Trigger.OBSERVATION)
    return row, changed
