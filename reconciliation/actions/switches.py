"""Shadow mode and the blast-radius breaker."""

from typing import Any

from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config.errors import Conflict, NotAllowed
from reconciliation.choices import BreakerScope
from reconciliation.models import (
    AgentStatus,
    BreakerTrip,
    ControlState,
)
from registry.choices import Role
from registry.models import Agent
from registry.roles import has_role


@transaction.atomic
def set_shadow(*, actor: Any, enabled: bool, agent: Agent | None = None) -> None:
    """Shadow mode for one agent or (agent=None) for the whole cluster: record, apply nothing."""
    if agent is None and not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed("Only compliance staff switch global shadow mode.")
    if agent is not None and not (has_role(actor, Role.COMPLIANCE) or (
            has_role(actor, Role.OWNER) and agent.owner_id == getattr(actor, "pk", None))):
        raise NotAllowed("Only the agent's owner or compliance staff switch its shadow mode.")
    if agent is None:
        control = ControlState.objects.select_for_update().get_or_create(pk=1)[0]
        before, control.shadow = control.shadow, enabled
        control.save(update_fields=["shadow"])
        target = "control:shadow"
    else:
        status = AgentStatus.objects.select_for_update().get_or_create(agent=agent)[0]
        before, status.shadow = status.shadow, enabled
        status.save(update_fields=["shadow"])
        target = f"agent:{agent.name}"
    audit.record(actor=actor, action=AuditAction.SHADOW_CHANGED, target=target,
                 agent=agent.name if agent else "", before={"shadow": before},
                 after={"shadow": enabled})


@transaction.atomic
def reset_breaker(*, actor: Any, reason: str, scope: str = "global") -> None:
    """Compliance resumes automatic correction after a tripped breaker: the cluster's
    (`global`) or one owner's or team's (`owner:alice`, `team:payments`)."""
    if not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed("Only compliance staff reset the breaker.")
    control = ControlState.objects.select_for_update().get_or_create(pk=1)[0]
    now = timezone.now()
    if scope != BreakerScope.GLOBAL:
        trip = BreakerTrip.objects.select_for_update().filter(scope=scope).first()
        if trip is None:
            raise Conflict(f"The breaker for {scope} is not tripped.", code="not_tripped")
        before = trip.to_dict()
        trip.delete()
        target = f"control:breaker:{scope}"
    else:
        if control.breaker_tripped_at is None:
            raise Conflict("The breaker is not tripped.", code="not_tripped")
        before = {"tripped_at": control.breaker_tripped_at.isoformat(),
                  "reason": control.breaker_reason}
        control.breaker_tripped_at = None
        control.breaker_reason = ""
        target = "control:breaker"
    # the reset holds: from now the breaker counts only findings detected after it
    control.breaker_resets = {**control.breaker_resets, str(scope): now.isoformat()}
    control.save(update_fields=["breaker_tripped_at", "breaker_reason", "breaker_resets"])
    audit.record(actor=actor, action=AuditAction.BREAKER_RESET, target=target,
                 before=before, after={"tripped_at": None, "counts_findings_after":
                                       now.isoformat()}, reason=reason)
