"""A framework report: every control of one framework, for one agent or the fleet over a
period, green, amber or red by the evidence queries that show it, each item naming its audit
entries. As a bundle it is built on the audit evidence bundle (audit/evidence.py): the report's
SHA-256 is written into the trail by the fetch's own `audit.exported` entry, a checkpoint is
signed over it, and every cited entry (and that one) comes with its inclusion proof, so
`agentctl audit verify` proves the report offline and refuses a changed colour."""

import hashlib
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from audit.chain import canonical_json, format_time
from audit.choices import AuditAction
from audit.evidence import TooManyEntries, proven_entries, signed_head
from audit.models import AuditCheckpoint, AuditEntry
from audit.verify import ENTRY_FIELDS
from compliance.evidence_queries import QUERIES, Item, Period
from compliance.frameworks import Framework, colour, library, query_status, with_custom
from compliance.models import FrameworkControl
from config.errors import NotFound

REPORT_FORMAT = "agentgov-framework-report/v1"


def newest_custom() -> list[dict[str, Any]]:
    """The newest version of every custom control, oldest change first."""
    newest: dict[tuple[str, str], FrameworkControl] = {}
    for row in FrameworkControl.objects.order_by("version"):
        newest[(row.framework, row.control_id)] = row
    return [{"framework": r.framework, "control_id": r.control_id, "version": r.version,
             "title": r.title, "queries": r.queries, "retired": r.retired}
            for r in sorted(newest.values(), key=lambda r: (r.changed_at, r.pk))]


def frameworks() -> dict[str, Framework]:
    """The library with compliance's own controls and mappings over it."""
    return with_custom(library(), newest_custom())


def framework(framework_id: str) -> Framework:
    found = frameworks().get(framework_id)
    if found is None:
        raise NotFound(f"No framework {framework_id!r}.")
    return found


def report(framework_id: str, agent: str, start: datetime, end: datetime) -> dict[str, Any]:
    """The report body: each control's colour and its queries' items (JSON-safe, hashed as
    canonical JSON)."""
    chosen = framework(framework_id)
    period = Period(agent, start, end)
    found = {name: [item.to_dict() for item in QUERIES[name](period)] if name in QUERIES
             else [Item(False, f"unknown evidence query {name!r}: nothing can show it").to_dict()]
             for name in {q for c in chosen.controls for q in c.queries}}
    controls = []
    for control in chosen.controls:
        queries = []
        for name in control.queries:
            items = found[name]
            met = sum(1 for item in items if item["ok"])
            queries.append({"query": name, "status": query_status([i["ok"] for i in items]),
                            "met": met, "total": len(items), "items": items})
        controls.append({"id": control.id, "title": control.title, "origin": control.origin,
                         "colour": colour([q["status"] for q in queries]),
                         "queries": queries})
    counts = {c: sum(1 for x in controls if x["colour"] == c) for c in ("green", "amber", "red")}
    return {"framework": chosen.id, "title": chosen.title, "agent": agent or None,
            "scope": agent or "fleet", "from": format_time(start), "to": format_time(end),
            "made_at": format_time(timezone.now()), "counts": counts, "controls": controls,
            "retired_from_library": list(chosen.retired)}


def digest(body: dict[str, Any]) -> str:
    """The SHA-256 of the report's canonical JSON, as its audit entry records it."""
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def cited(body: dict[str, Any]) -> tuple[set[int], set[int]]:
    """The entry seqs and the tree head sizes the report's items name."""
    seqs, heads = set(), set()
    for control in body["controls"]:
        for query in control["queries"]:
            for item in query["items"]:
                seqs.update(item["entries"])
                heads.update(item["heads"])
    return seqs, heads


def export_entry(framework_id: str, size: int, sha256: str) -> int:
    """The seq of the `audit.exported` entry that recorded this report's digest."""
    return AuditEntry.objects.filter(
        action=AuditAction.AUDIT_EXPORTED, target=f"framework:{framework_id}", seq__lte=size,
        after__digest=sha256).values_list("seq", flat=True).latest("seq")


def bundle(body: dict[str, Any], size: int, sha256: str) -> dict[str, Any]:
    """The signed bundle of a report whose digest the checkpoint of `size` covers."""
    seqs, heads = cited(body)
    seqs.add(export_entry(body["framework"], size, sha256))
    if len(seqs) > settings.AUDIT_EVIDENCE_MAX_ENTRIES:
        raise TooManyEntries(f"the report cites more than {settings.AUDIT_EVIDENCE_MAX_ENTRIES} "
                             f"entries; ask for a shorter period or one agent")
    rows = list(AuditEntry.objects.filter(seq__in=seqs).order_by("seq").values(*ENTRY_FIELDS))
    return {"format": REPORT_FORMAT, "report": body, "digest": sha256, **signed_head(size),
            "heads": [c.to_dict() for c in AuditCheckpoint.objects.filter(seq__in=heads)],
            "entries": proven_entries(rows, size)}
