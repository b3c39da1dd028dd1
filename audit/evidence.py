"""Evidence bundles (docs/audit-format.md): one agent's entries for a period, each with its
RFC 6962 inclusion proof to one signed checkpoint, so an auditor verifies the file offline
without the rest of the trail."""

from datetime import datetime
from typing import Any

from agentgov import merkle
from agentgov.audit import EVIDENCE_FORMAT

from audit import tree
from audit.chain import format_time
from audit.models import AuditCheckpoint, AuditEntry
from audit.verify import ENTRY_FIELDS

PROOF_BATCH = 500  # entries whose proof nodes are read in one query


class TooManyEntries(ValueError):
    """The period holds more entries than one bundle may carry."""


def bundle(agent: str, start: datetime | None, end: datetime | None, size: int,
           limit: int) -> dict[str, Any]:
    """The bundle of `agent`'s entries in [start, end], proven against the checkpoint of `size`
    (which the caller has just signed)."""
    checkpoint = AuditCheckpoint.objects.get(seq=size)
    entries = AuditEntry.objects.filter(agent=agent, seq__lte=size)
    if start is not None:
        entries = entries.filter(at__gte=start)
    if end is not None:
        entries = entries.filter(at__lte=end)
    rows = list(entries.order_by("seq").values(*ENTRY_FIELDS)[:limit + 1])
    if len(rows) > limit:
        raise TooManyEntries(f"more than {limit} entries in the period; ask for a shorter one")
    items = []
    for first in range(0, len(rows), PROOF_BATCH):
        batch = rows[first:first + PROOF_BATCH]
        nodes = tree.load(merkle.nodes_for(
            r for row in batch for r in merkle.inclusion_ranges(row["seq"] - 1, size)))
        lookup = nodes.__getitem__
        for row in batch:
            proof = merkle.inclusion_proof(row["seq"] - 1, size,
                                           lambda level, index, get=lookup: get((level, index)))
            row["at"] = format_time(row["at"])
            items.append({"entry": row, "leaf_index": row["seq"] - 1,
                          "proof": [h.hex() for h in proof]})
    return {"format": EVIDENCE_FORMAT, "agent": agent,
            "from": format_time(start) if start else None,
            "to": format_time(end) if end else None,
            "checkpoint": checkpoint.to_dict(), "entries": items}
