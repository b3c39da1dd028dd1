"""What every reconciliation action shares: names, alerts, suspension, escalations."""

import hashlib
from datetime import datetime
from typing import Any

from django.utils import timezone

import audit
from audit.actions import actor_label
from audit.alert_kinds import AlertKind
from audit.chain import canonical_json
from audit.choices import AuditAction
from reconciliation import alerts
from reconciliation.attribution import is_rollout
from reconciliation.fleet_snapshot import request_refresh
from reconciliation.incidents import incident_token
from reconciliation.models import AgentStatus, BreakerTrip, ControlState, Finding
from reconciliation.reconciler.diff import effective_desired
from registry import holds
from registry.choices import Lifecycle
from registry.desired_push import announce_desired_change
from registry.models import Agent


def state_hash(state: dict[str, Any]) -> str:
    """SHA-256 of an observed state's canonical JSON."""
    return hashlib.sha256(canonical_json(state).encode()).hexdigest()


def desired_now(agent: Agent, now: datetime) -> dict[str, Any]:
    """The effective desired state at `now`: approved spec (narrowed to the safe tools while
    an overdue review restricts it), expired grants removed, not running while the agent is
    suspended or a stop reaches it."""
    return effective_desired(agent.enforced_spec, now, suspended=held_still(agent))


def held_still(agent: Agent) -> bool:
    """Whether the agent must not run: suspended, or reached by a stop in force (which also
    holds an agent resumed by hand or registered into the stop's scope after it)."""
    return agent.lifecycle == Lifecycle.SUSPENDED or holds.stopped(agent)


def link(agent: Agent) -> str:
    return f"/agents/{agent.name}/"


ROLLOUT_EVENTS = {AlertKind.DRIFT_DETECTED: AlertKind.ROLLOUT_STARTED,
                  AlertKind.DRIFT_CORRECTED: AlertKind.ROLLOUT_SYNCED}


def alert(event: AlertKind, agent: Agent, finding: Finding | None = None, **extra: Any) -> None:
    payload = {"agent": agent.name, "owner_id": agent.owner_id, "link": link(agent), **extra}
    if finding is not None and is_rollout(finding.cause_key) and event in ROLLOUT_EVENTS:
        # an approved generation being applied is a rollout, never announced as drift
        event = ROLLOUT_EVENTS[event]
        payload["generation"] = (finding.cause or {}).get("generation")
    if finding is not None:
        payload.update(finding=finding.pk, severity=finding.severity, kind=finding.kind,
                       pointer=finding.pointer, incident=incident_token(finding),
                       # for the sentence: "gained write access to crm"
                       expected=finding.expected, actual=finding.actual)
        request_refresh()  # a finding opened or closed: the fleet view counts them
    alerts.broadcast(event, payload)


def audit_label(actor: Any) -> str:
    return actor_label(actor)




def breaker_held(agent: Agent, control: ControlState) -> str:
    """Which tripped breaker pauses automatic correction of this agent ("" when none): the
    cluster's, its owner's or its team's."""
    if control.breaker_tripped_at is not None:
        return "breaker tripped"
    scope = (BreakerTrip.objects.filter(scope__in=BreakerTrip.scopes_of(agent))
             .order_by("tripped_at").values_list("scope", flat=True).first())
    return f"breaker tripped for {scope}" if scope else ""


def cluster_held() -> str:
    """Why the whole cluster's enforcement is recorded and not applied ("" when it is
    applied): compliance's global shadow mode or the cluster's breaker. Unlike an agent's own
    shadow or its owner's breaker, these hold every agent alike, so they shield nobody from a
    fleet effect that reaches others."""
    control = ControlState.load()
    if control.breaker_tripped_at is not None:
        return "breaker tripped"
    return "shadow mode" if control.shadow else ""


def enforcement_held(agent: Agent) -> str:
    """Why enforcement is recorded and not applied right now ("" when it is applied): shadow
    mode, global or for this agent, or the tripped breaker."""
    control = ControlState.load()
    if held := breaker_held(agent, control):
        return held
    if control.shadow or AgentStatus.objects.filter(agent=agent, shadow=True).exists():
        return "shadow mode"
    return ""


def suspend_agent(agent: Agent, *, actor: Any, reason: str) -> bool:
    """Mark an agent suspended (its connector was told); False when it already was."""
    updated = Agent.objects.filter(pk=agent.pk).exclude(lifecycle=Lifecycle.SUSPENDED).update(
        lifecycle=Lifecycle.SUSPENDED, updated_at=timezone.now())
    if not updated:
        return False
    agent.lifecycle = Lifecycle.SUSPENDED
    announce_desired_change(agent.name)  # its held long-poll answers at once
    audit.record(actor=actor, action=AuditAction.AGENT_SUSPENDED, target=f"agent:{agent.name}",
                 agent=agent.name, before={"lifecycle": "active"},
                 after={"lifecycle": "suspended"}, reason=reason)
    alert(AlertKind.AGENT_SUSPENDED, agent, message=reason, severity="high")
    request_refresh()  # the fleet view's compliance timeline shows suspensions
    return True
