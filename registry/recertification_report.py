"""The recertification report: agents by review date, overdue first, as rows for the API, the
page and the CSV export. Owners see their own agents; reviewers see every agent."""

import csv
import io
from datetime import datetime, timedelta
from typing import Any

from agentgov.audit import escape_cell
from django.conf import settings
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from registry.choices import Lifecycle, VersionState
from registry.models import Agent, DesiredStateVersion
from registry.roles import sees_everything

FIELDS = ("agent", "owner", "generation", "review_due_at", "state", "days_left",
          "overdue_effect", "restricted_to", "recertification_pending", "lifecycle")
STATES = ("overdue", "due", "scheduled")


def _iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when else None


def agents_for(user: Any) -> QuerySet[Agent]:
    """Approved, not retired agents with a review date that `user` may list."""
    pending = DesiredStateVersion.objects.filter(agent=OuterRef("pk"), recertifies=True,
                                                 state=VersionState.PENDING)
    rows = (Agent.objects.filter(active_version__isnull=False, review_due_at__isnull=False)
            .exclude(lifecycle=Lifecycle.RETIRED).select_related("owner")
            .annotate(recertification_pending=Exists(pending)).order_by("review_due_at", "name"))
    return rows if sees_everything(user) else rows.filter(owner=user)


def state_of(agent: Agent, now: datetime) -> str:
    """overdue (the date passed), due (within the reminder lead time) or scheduled."""
    if agent.overdue_at is not None or agent.review_due_at <= now:
        return "overdue"
    if (agent.review_due_at - now).total_seconds() <= settings.RECERT_REMIND_DAYS * 86_400:
        return "due"
    return "scheduled"


def row(agent: Agent, now: datetime) -> dict[str, Any]:
    """One agent's line of the report."""
    return {"agent": agent.name, "owner": agent.owner.username, "generation": agent.generation,
            "review_due_at": _iso(agent.review_due_at), "state": state_of(agent, now),
            "days_left": (agent.review_due_at - now).days,
            "overdue_effect": agent.overdue_effect or None,
            "restricted_to": agent.restricted_to,
            "recertification_pending": bool(getattr(agent, "recertification_pending", False)),
            "lifecycle": agent.lifecycle}


def report(user: Any, *, state: str = "", now: datetime | None = None) -> list[dict[str, Any]]:
    """The rows `user` may see, soonest review first, optionally of one state."""
    now = now or timezone.now()
    rows = [row(agent, now) for agent in agents_for(user)]
    return [r for r in rows if not state or r["state"] == state]


def to_csv(rows: list[dict[str, Any]]) -> str:
    """The report as CSV; cells a spreadsheet would run as formulas are escaped."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(FIELDS)
    for r in rows:
        writer.writerow([escape_cell("" if r[f] is None else ";".join(r[f])
                                     if isinstance(r[f], list) else str(r[f])) for f in FIELDS])
    return buffer.getvalue()


def due_for_owner(user: Any, now: datetime | None = None) -> list[dict[str, Any]]:
    """The owner's inbox of reviews: their agents whose review is due or overdue, soonest
    first (one query; the overview shows it)."""
    now = now or timezone.now()
    soon = now + timedelta(days=settings.RECERT_REMIND_DAYS)
    agents = agents_for(user).filter(owner=user, review_due_at__lte=soon)
    return [row(agent, now) for agent in agents[:50]]
