"""Recording what an agent reports or a connector reads, for registered agents and for
unregistered (shadow) ones alike: a new history row only when the state changed."""

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

import audit
from audit.choices import AuditAction
from reconciliation.actions.common import audit_label, state_hash
from reconciliation.choices import (
    Trigger,
)
from reconciliation.controller.triggers import request_reconcile
from reconciliation.models import ObservedState
from reconciliation.resync_query import needing_pass
from reconciliation.silence import clear_on_report
from reconciliation.toxic_path_requests import request_path_check
from registry.models import Agent

_unregistered_keeper: list[Callable[..., tuple[Any, ObservedState, bool]]] = []


def append_observation(history: QuerySet[ObservedState], state: dict[str, Any], *, actor: Any,
                       source: str, target: str, agent_name: str,
                       change: dict[str, Any] | None = None,
                       **owner: Any) -> tuple[ObservedState, bool]:
    """Append `state` to a history (an agent's, or an unregistered one's: runtime) unless it
    equals the latest row (then that row's last_seen_at moves: a heartbeat). Call inside a
    transaction."""
    now = timezone.now()
    digest = state_hash(state)
    latest = history.select_for_update(no_key=True).order_by("-observed_at").first()
    if latest is not None and latest.state_sha256 == digest:
        latest.last_seen_at = now
        # By id and day: on PostgreSQL the update then touches one partition, not every day's.
        ObservedState.objects.filter(pk=latest.pk, observed_at=latest.observed_at).update(
            last_seen_at=now)
        return latest, False
    row = ObservedState.objects.create(state=state, state_sha256=digest, source=source,
                                       reported_by=audit_label(actor), observed_at=now,
                                       last_seen_at=now, change=change, **owner)
    audit.record(actor=actor, action=AuditAction.OBSERVATION_RECORDED, target=target,
                 agent=agent_name, before=latest.state if latest else None, after=state,
                 reason=f"reported through {source}" + (
                     f"; changed by {change['key']}" if change else ""))
    return row, True


@transaction.atomic
def record_observation(agent: Agent, state: dict[str, Any], *, actor: Any, source: str,
                       trigger_reconcile: bool = True, change: dict[str, Any] | None = None
                       ) -> tuple[ObservedState, bool]:
    """Store an observed state (with the change that made it, when the reporter names one);
    only a changed state is a new history row (a heartbeat just moves last_seen_at). Queues a
    reconcile after commit, unless the state is unchanged and the agent's last pass found it
    in sync and nothing has come due since (a heartbeat of a converged agent runs no pass; the
    pass asked its controller to come back when a grant ends or a waiver lapses). Returns
    (row, changed)."""
    state = _with_listed_tools(agent, state)
    row, changed = append_observation(ObservedState.objects.filter(agent=agent), state,
                                      actor=actor, source=source, target=f"agent:{agent.name}",
                                      agent_name=agent.name, agent=agent, change=change)

    clear_on_report(agent, row.last_seen_at)  # heard again: an open silence ends
    if trigger_reconcile and (changed or needing_pass(Agent.objects.filter(pk=agent.pk),
                                                      timezone.now())):
        request_reconcile(agent.pk, Trigger.OBSERVATION)
    if changed:
        request_path_check()  # a changed state may open or close a toxic path in the fleet
    return row, changed


def _with_listed_tools(agent: Agent, state: dict[str, Any]) -> dict[str, Any]:
    """MCP servers reported without their tools (a framework adapter knows which servers the
    agent reaches, not what each offers) keep the tools last listed for them by the MCP proxy,
    so a full report does not read as every approved MCP tool removed."""
    servers = state.get("mcp_servers")
    if not isinstance(servers, list) or all("tools" in server for server in servers):
        return state
    latest = agent.observations.order_by("-observed_at").only("state").first()
    listed = {server.get("name"): server
              for server in (latest.state.get("mcp_servers", []) if latest else [])}
    return {**state, "mcp_servers": [
        server if "tools" in server else {**server, **_listings(listed.get(server["name"], {}))}
        for server in servers]}


def _listings(server: dict[str, Any]) -> dict[str, Any]:
    """What the MCP proxy last listed for a server: its tools, and its prompts, resources and
    resource templates when it listed them."""
    kept = {key: server[key] for key in ("prompts", "resources", "resource_templates")
            if key in server}
    return {"tools": server.get("tools", []), **kept}


@transaction.atomic
def record_observed_part(agent: Agent, key: str, value: Any, *, actor: Any, source: str
                         ) -> tuple[ObservedState, bool]:
    """Replace one key of the agent's latest observed state, keeping the rest: a reporter that
    sees one side of the agent (the MCP proxy sees its MCP servers) must not erase what the
    agent itself reported. For `mcp_servers` the reported servers replace the same-named ones
    (one proxy per server). The agent row is locked so two partial reports cannot lose one."""
    Agent.objects.select_for_update(no_key=True).filter(pk=agent.pk).first()
    latest = agent.observations.order_by("-observed_at").only("state").first()
    state = dict(latest.state) if latest is not None else {}
    if key == "mcp_servers":
        # one proxy fronts one server: the servers it reports replace theirs, others stay
        reported = {server["name"] for server in value}
        kept = [server for server in state.get(key, []) if server.get("name") not in reported]
        value = sorted([*kept, *value], key=lambda server: str(server.get("name")))
    state[key] = value
    return record_observation(agent, state, actor=actor, source=source)


def keep_unregistered_with(keeper: Callable[..., tuple[Any, ObservedState, bool]]) -> None:
    """Who keeps what platforms report for agents the registry does not know: runtime, which
    owns those shadow agents, registers its action from its AppConfig.ready."""
    _unregistered_keeper[:] = [keeper]


def note_unregistered_observation(name: str, state: dict[str, Any], *, actor: Any,
                                  source: str = "platform") -> tuple[Any, ObservedState, bool]:
    """Keep what a platform reported for an agent the registry does not know (runtime's
    `note_unregistered_observation`). Returns (shadow agent, row, changed). A process where
    nobody keeps them refuses, never drops the report silently."""
    if not _unregistered_keeper:
        raise ImproperlyConfigured("nobody keeps unregistered agents' reports: "
                                   "is runtime in INSTALLED_APPS?")
    return _unregistered_keeper[0](name, state, actor=actor, source=source)
