"""Whether a stop reaches an agent now: read by the one decision point (every decision of a
stopped agent is denied) and by the desired-state answer (a stopped agent is not running, so
its adapters and MCP proxy refuse every call). Imports nothing from reconciliation."""

from typing import Any

from compliance.models import Stop


def active_stops() -> list[Stop]:
    """The stops in force, oldest first (usually none: one cheap query)."""
    return list(Stop.objects.select_related("owner", "stopped_by")
                .filter(lifted_at__isnull=True).order_by("stopped_at", "pk"))


def stop_covering(agent: Any, stops: list[Stop] | None = None) -> Stop | None:
    """The oldest stop in force that reaches `agent`, or None."""
    for stop in active_stops() if stops is None else stops:
        if stop.covers(agent):
            return stop
    return None


def stop_reason(agent: Any, stops: list[Stop] | None = None) -> str | None:
    """Why `agent` is stopped ("stop N: ..."), or None when no stop reaches it."""
    stop = stop_covering(agent, stops)
    if stop is None:
        return None
    return (f"stop {stop.pk}: {stop.describe()} stopped by {stop.stopped_by.username}: "
            f"{stop.reason}")


def held_by_stop(agent: Any) -> bool:
    """Another hold on a suspended agent ends (a group block falls back, an overdue review is
    recertified) while a stop reaches it: the stop takes the suspension over, so the agent
    stays suspended and runs again when the stop is lifted. False when no stop reaches it.
    Call inside the transaction that would have resumed it."""
    stop = stop_covering(agent)
    if stop is None:
        return False
    stop = Stop.objects.select_for_update(no_key=True).get(pk=stop.pk)
    if agent.name not in stop.agents:
        stop.agents = [*stop.agents, agent.name]
        stop.save(update_fields=["agents"])
    return True
