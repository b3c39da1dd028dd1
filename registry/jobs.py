"""Thin RQ entry points of the registry: review checks (recertification). Stopping a retired
agent on its platform is the loop's (reconciliation.jobs.stop_retired_agent), and so is the
inbox sweep (reconciliation.jobs.inbox_sweep: the inbox is the loop's)."""

import importlib

from django.utils import timezone

from registry.actions.recertification import due_agent_ids, mark_overdue, remind_owner


def check_review(agent_id: int) -> str:
    """Remind the owner or mark the agent overdue, whichever is due now (no-op otherwise)."""
    reminded = remind_owner(agent_id)
    overdue = mark_overdue(agent_id)
    return "overdue" if overdue else "reminded" if reminded else "nothing due"


def check_reviews() -> dict[str, int]:
    """Cron backstop: every agent whose reminder or review date came and was not acted on (an
    exact-time job lost while Redis was down, a changed interval)."""
    remind, overdue = due_agent_ids(timezone.now())
    return {"reminded": sum(remind_owner(pk) for pk in remind),
            "overdue": sum(mark_overdue(pk) for pk in overdue)}


# Jobs that moved to the app that owns them. A job the previous release queued or scheduled
# still names this module in Redis; RQ finds it here by name (not imported: reconciliation
# sits above the registry). Drop an entry once no release that queued it is deployed.
MOVED_JOBS = {
    "inbox_sweep": "reconciliation.jobs",  # scheduled at an inbox item's coming deadline
}


def __getattr__(name: str):
    """The moved job `name`, for a job queued under this module's path (PEP 562)."""
    if name in MOVED_JOBS:
        return getattr(importlib.import_module(MOVED_JOBS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
