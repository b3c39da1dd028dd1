"""An agent's sync status as people read it (API, agent page): the status the last poll
stored, brought up to date with approvals since, and what the last fetch said."""

from typing import Any

from gitsource.choices import SyncState
from gitsource.models import ManagedAgent
from registry.models import Agent


def for_agent(agent: Agent) -> dict[str, Any] | None:
    """The agent's sync status, or None when no Git source manages it (no query when the
    agent was read with `select_related("git__source")`)."""
    try:
        managed = agent.git
    except ManagedAgent.DoesNotExist:
        return None
    return sync_status(agent, managed)


def sync_status(agent: Agent, managed: ManagedAgent) -> dict[str, Any]:
    """The stored status, brought up to date with approvals since the last poll, and what
    the last fetch said."""
    active = agent.active_version
    sync, message = managed.sync, managed.message
    if (active and managed.branch_spec_sha256 == active.spec_sha256
            and managed.branch_metadata == active.metadata and sync != SyncState.IN_SYNC):
        sync = SyncState.IN_SYNC
        message = (f"in sync with branch {managed.source.branch} at "
                   f"{managed.branch_commit[:12]}, approved as generation {agent.generation}")
    source = managed.source
    fetch = None
    if source.fetch_failed_at:
        fetch = (f"fetching {source.url} has failed since "
                 f"{source.fetch_failed_at:%Y-%m-%d %H:%M:%S} UTC: "
                 f"{source.fetch_error}; generation {agent.generation} stays enforced")
    return {"managed": True, "source": source.name, "path": managed.path, "sync": sync,
            "message": message, "branch_commit": managed.branch_commit or None,
            "generation": agent.generation, "fetch_error": fetch,
            "checked_at": managed.updated_at.isoformat()}
