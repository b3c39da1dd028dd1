"""The approvers' inbox as one queue: pending proposals, open escalations and pending runtime
decisions, longest waiting first (snoozed escalations leave it until their time comes)."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import CharField, F, QuerySet, Value

from reconciliation.models import Escalation
from registry.choices import VersionState
from registry.models import DesiredStateVersion

PROPOSAL, ESCALATION = "proposal", "escalation"


@dataclass(frozen=True)
class Entry:
    """One place in the queue; the page loads the rows behind a page of entries."""

    kind: str  # proposal | escalation (pending decisions are escalations too)
    pk: int
    waiting_since: datetime


def queue(now: datetime | None = None) -> QuerySet:
    """(kind, pk, waiting_since) of everything waiting, oldest first: one UNION query, so a
    page of it costs the same whatever the number of proposals and escalations."""
    proposals = (DesiredStateVersion.objects.filter(state=VersionState.PENDING).order_by()
                 .annotate(kind=Value(PROPOSAL, output_field=CharField()),
                           waiting_since=F("created_at"))
                 .values_list("kind", "pk", "waiting_since"))
    escalations = (Escalation.objects.awake(now).order_by()
                   .annotate(kind=Value(ESCALATION, output_field=CharField()),
                             waiting_since=F("opened_at"))
                   .values_list("kind", "pk", "waiting_since"))
    return proposals.union(escalations, all=True).order_by("waiting_since", "kind", "pk")


def entries(rows: list[tuple[str, int, datetime]]) -> list[Entry]:
    return [Entry(kind, pk, since) for kind, pk, since in rows]


def escalations_for(page: list[Entry]) -> dict[int, Escalation]:
    """The escalations of a page of entries (one query)."""
    wanted = [e.pk for e in page if e.kind == ESCALATION]
    return {e.pk: e for e in Escalation.objects.filter(pk__in=wanted).select_related(
        "agent", "finding", "decision", "assignee")}
