"""An agent's sync status as people read it (API, agent page): the status the last poll
stored, brought up to date with approvals since, and what the last fetch said."""

from typing import Any

from gitsource.choices import SyncState
from gitsource.models import GitSource, ManagedAgent
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


FLEET_LISTED = 20
FLEET_READ = 200


def fleet_summary() -> dict[str, Any] | None:
    """The Git-managed agents for the fleet page: how many stand in each sync state (each
    brought up to date as on its own page) and the first not in sync by name; the sources
    whose fetch is failing. None when no source manages an agent. A fixed number of queries:
    the stored state is read for all, and only agents stored as not in sync are looked at."""
    managed = ManagedAgent.objects.select_related("agent__active_version", "source")
    total = managed.count()
    if not total:
        return None
    # Those stored as not in sync, each brought up to date (an approval since the last poll
    # may have brought it in sync); past the first FLEET_READ they count as stored.
    stored_off = managed.exclude(sync=SyncState.IN_SYNC).order_by("agent__name")
    statuses = [(row.agent.name, sync_status(row.agent, row)) for row in stored_off[:FLEET_READ]]
    off = [(name, status) for name, status in statuses if status["sync"] != SyncState.IN_SYNC]
    counts = {state.value: 0 for state in SyncState}
    for _, status in off:
        counts[status["sync"]] += 1
    unread = stored_off.count() - len(statuses) if len(statuses) == FLEET_READ else 0
    counts[SyncState.IN_SYNC] = total - len(off) - unread
    failing = list(GitSource.objects.filter(fetch_failed_at__isnull=False)
                   .order_by("name").values_list("name", flat=True))
    return {"total": total, "counts": counts, "agents": off[:FLEET_LISTED],
            "failing_sources": failing}
