"""The evidence queries: what the audit trail shows happened in a period, for one agent or the
fleet, as items that each meet the query or not, each naming the audit entries (by seq) or the
signed tree heads (by size) that show it. Everything is read from the trail, so every item
can be proven offline by the entries a report bundle carries."""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from agentgov import checkpoints as signing
from agentgov.audit import KeyRing
from django.conf import settings

from audit import keys
from audit.choices import AuditAction
from audit.models import AuditCheckpoint, AuditEntry
from compliance.choices import EvidenceQuery

# Drift counts as corrected when its correction was verified within this long of its detection.
DRIFT_CORRECTED_WITHIN = timedelta(hours=1)
MAX_HEADS = 100  # signed heads judged per report: the newest in the period
FIELDS = ("seq", "at", "actor", "action", "target", "agent", "before", "after")


class TooMuchEvidence(ValueError):
    """The period holds more items than one report may carry."""


@dataclass(frozen=True)
class Item:
    """One thing the trail shows: met or not, in words, and the entries or heads that show it."""

    ok: bool
    summary: str
    seqs: tuple[int, ...] = ()
    heads: tuple[int, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "summary": self.summary, "entries": list(self.seqs),
                "heads": list(self.heads)}


@dataclass(frozen=True)
class Period:
    """Whose evidence (an agent's name, or "" for the fleet) between two times."""

    agent: str
    start: datetime
    end: datetime

    def entries(self, *actions: str) -> list[dict[str, Any]]:
        rows = AuditEntry.objects.filter(action__in=actions, at__gte=self.start,
                                         at__lte=self.end)
        if self.agent:
            rows = rows.filter(agent=self.agent)
        return _bounded(rows)


def _bounded(rows: Any) -> list[dict[str, Any]]:
    limit = settings.AUDIT_EVIDENCE_MAX_ENTRIES
    found = list(rows.order_by("seq").values(*FIELDS)[:limit + 1])
    if len(found) > limit:
        raise TooMuchEvidence(f"more than {limit} entries for one query in the period; ask "
                              f"for a shorter period or one agent")
    return found


def _later(targets: set[str], *actions: str) -> dict[str, list[dict[str, Any]]]:
    """Entries of these actions about these targets, at any time, by target, in order."""
    found: dict[str, list[dict[str, Any]]] = {}
    for row in _bounded(AuditEntry.objects.filter(action__in=actions, target__in=targets)):
        found.setdefault(row["target"], []).append(row)
    return found


def format_time(moment: datetime) -> str:
    """A time as a person reads it in an item (the entries carry the exact one)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _is_person(actor: str) -> bool:
    return bool(actor) and not actor.startswith(("system:", "agent:")) and actor != "anonymous"


def approvals_four_eyes(period: Period) -> list[Item]:
    """Each approval in the period, met when its approver did not propose (or revise) it."""
    approvals = period.entries(AuditAction.PROPOSAL_APPROVED)
    proposed = _later({a["target"] for a in approvals}, AuditAction.PROPOSAL_CREATED,
                      AuditAction.PROPOSAL_UPDATED)
    items = []
    for approval in approvals:
        authors = proposed.get(approval["target"], [])
        names = sorted({a["actor"] for a in authors})
        ok = bool(authors) and approval["actor"] not in names and _is_person(approval["actor"])
        items.append(Item(ok, f"{approval['target']} of {approval['agent']} proposed by "
                              f"{', '.join(names) or 'nobody on record'}, approved by "
                              f"{approval['actor']}",
                          tuple(a["seq"] for a in authors) + (approval["seq"],)))
    return items


def recertifications_on_time(period: Period) -> list[Item]:
    """Each recertification (met when the agent was not overdue) and each review date that
    passed without one (never met)."""
    items = []
    for row in period.entries(AuditAction.AGENT_RECERTIFIED,
                              AuditAction.RECERTIFICATION_OVERDUE):
        due = (row["before"] or {}).get("review_due_at") \
            if row["action"] == AuditAction.AGENT_RECERTIFIED \
            else (row["after"] or {}).get("review_due_at")
        if row["action"] == AuditAction.RECERTIFICATION_OVERDUE:
            items.append(Item(False, f"{row['agent']}: review date {due} passed without "
                                     f"recertification", (row["seq"],)))
            continue
        late = bool((row["before"] or {}).get("overdue"))
        items.append(Item(not late, f"{row['agent']} recertified by {row['actor']} at "
                                    f"{format_time(row['at'])}"
                                    + (f", late (review was due {due})" if late
                                       else f" (due {due})"), (row["seq"],)))
    return items


def drift_corrected(period: Period) -> list[Item]:
    """Each drift found in the period, met when its correction was verified within
    DRIFT_CORRECTED_WITHIN of its detection."""
    found = period.entries(AuditAction.FINDING_OPENED, AuditAction.FINDING_REGRESSED)
    closed = _later({f["target"] for f in found}, AuditAction.FINDING_CORRECTED,
                    AuditAction.FINDING_RESOLVED)
    items = []
    for row in found:
        close = next((c for c in closed.get(row["target"], []) if c["seq"] > row["seq"]), None)
        what = f"{row['target']} of {row['agent']} detected at {format_time(row['at'])}"
        if close is None:
            items.append(Item(False, f"{what}, not corrected", (row["seq"],)))
            continue
        took = close["at"] - row["at"]
        verb = "corrected" if close["action"] == AuditAction.FINDING_CORRECTED else "resolved"
        items.append(Item(took <= DRIFT_CORRECTED_WITHIN,
                          f"{what}, {verb} at {format_time(close['at'])} "
                          f"({took.total_seconds():.0f} s)", (row["seq"], close["seq"])))
    return items


def decisions_signed_off(period: Period) -> list[Item]:
    """Each runtime decision held for a human in the period, met when a person answered it."""
    held = [row for row in period.entries(AuditAction.DECISION_MADE)
            if (row["after"] or {}).get("outcome") == "pending"]
    answers = _later({h["target"] for h in held}, AuditAction.DECISION_DECIDED,
                     AuditAction.DECISION_EXPIRED)
    items = []
    for row in held:
        answer = next(iter(answers.get(row["target"], [])), None)
        what = f"{row['target']} of {row['agent']} held for a human at {format_time(row['at'])}"
        if answer is None:
            items.append(Item(False, f"{what}, not answered yet", (row["seq"],)))
        elif answer["action"] == AuditAction.DECISION_EXPIRED:
            items.append(Item(False, f"{what}, expired unanswered",
                              (row["seq"], answer["seq"])))
        else:
            outcome = (answer["after"] or {}).get("outcome", "?")
            items.append(Item(_is_person(answer["actor"]),
                              f"{what}, {outcome} by {answer['actor']}",
                              (row["seq"], answer["seq"])))
    return items


def audit_signed_heads(period: Period) -> list[Item]:
    """The newest signed tree heads of the period (the whole trail's: one log for every agent),
    each met when its signature verifies with a trusted key."""
    heads = list(AuditCheckpoint.objects.filter(at__gte=period.start, at__lte=period.end)
                 .order_by("-seq")[:MAX_HEADS])
    ring = KeyRing(*keys.trusted())
    items = []
    for head in reversed(heads):
        try:
            signing.verify_checkpoint(head.to_dict(), ring, getattr(ring, "ranges", None))
            ok, said = True, "signed by a trusted key"
        except (signing.SignatureError, signing.UnknownKey, signing.RetiredKey) as error:
            ok, said = False, f"not proven: {error}"
        items.append(Item(ok, f"tree head {head.seq} at {format_time(head.at)} {said}",
                          heads=(head.seq,)))
    return items


QUERIES: dict[str, Callable[[Period], list[Item]]] = {
    EvidenceQuery.APPROVALS_FOUR_EYES: approvals_four_eyes,
    EvidenceQuery.RECERTIFICATIONS_ON_TIME: recertifications_on_time,
    EvidenceQuery.DRIFT_CORRECTED: drift_corrected,
    EvidenceQuery.DECISIONS_SIGNED_OFF: decisions_signed_off,
    EvidenceQuery.AUDIT_SIGNED_HEADS: audit_signed_heads,
}
