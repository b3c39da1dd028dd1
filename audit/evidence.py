"""Evidence bundles (docs/audit-format.md): one agent's entries for a period, each with its
RFC 6962 inclusion proof to one signed checkpoint, so an auditor verifies the file offline
without the rest of the trail; and a consistency proof from every smaller checkpoint (those in
the database and those the directory witnesses hold) to it, so every witness checkpoint is held
against the bundle's head, offline and here before it is served."""

from datetime import datetime
from typing import Any

from agentgov import merkle
from agentgov.audit import EVIDENCE_FORMAT, Failure, KeyRing
from agentgov.evidence import check_witnessed

from audit import keys, tree, witnesses
from audit.chain import format_time
from audit.models import AuditCheckpoint, AuditEntry
from audit.verify import ENTRY_FIELDS

PROOF_BATCH = 500  # entries (or checkpoint sizes) whose proof nodes are read in one query


class TooManyEntries(ValueError):
    """The period holds more entries than one bundle may carry."""


class WitnessContradicts(ValueError):
    """A directory witness holds a checkpoint the bundle's head does not extend."""


def consistency_proofs(size: int, held: dict[str, dict[int, Any]]) -> list[dict[str, Any]]:
    """A consistency proof to `size` from every smaller checkpoint size the database or a
    witness knows, oldest first, the nodes of a batch of sizes read in one query."""
    sizes = set(AuditCheckpoint.objects.filter(seq__lt=size).values_list("seq", flat=True))
    sizes |= {s for copies in held.values() for s in copies if 0 < s < size}
    proofs = []
    ordered = sorted(sizes)
    for first in range(0, len(ordered), PROOF_BATCH):
        batch = ordered[first:first + PROOF_BATCH]
        nodes = tree.load(merkle.nodes_for(
            r for before in batch for r in merkle.consistency_ranges(before, size)))
        lookup = nodes.__getitem__
        for before in batch:
            try:
                proof = merkle.consistency_proof(
                    before, size, lambda level, index, get=lookup: get((level, index)))
            except KeyError:  # a node gone from the store: no proof, the verifier says so
                continue
            proofs.append({"size": before, "proof": [h.hex() for h in proof]})
    return proofs


def check_witnesses(checkpoint: dict[str, Any], proofs: list[dict[str, Any]],
                    held: dict[str, dict[int, Any]]) -> None:
    """Raise WitnessContradicts unless every directory witness's checkpoints up to the bundle's
    are signed by a trusted key and proven prefixes of its tree (the offline check, here)."""
    by_size = {item["size"]: item["proof"] for item in proofs}
    ring = KeyRing(*keys.trusted())
    for url, copies in held.items():
        readable = {s: c for s, c in copies.items() if isinstance(c, dict)}
        try:
            check_witnessed(checkpoint, by_size, readable, ring)
        except Failure as failure:
            raise WitnessContradicts(f"witness {url}: {failure.reason}: {failure.message}") \
                from None


def proven_entries(rows: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """Each entry row (ENTRY_FIELDS, seq <= size) with its inclusion proof to the tree of
    `size`, the nodes of a batch of entries read in one query."""
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
    return items


def signed_head(size: int) -> dict[str, Any]:
    """The checkpoint of `size` and a consistency proof to it from every smaller checkpoint,
    held against the directory witnesses (WitnessContradicts when one objects)."""
    held = {url: witnesses.copies(url) for url in witnesses.readable_witnesses()}
    head = AuditCheckpoint.objects.get(seq=size).to_dict()
    proofs = consistency_proofs(size, held)
    check_witnesses(head, proofs, held)
    return {"checkpoint": head, "consistency": proofs}


def bundle(agent: str, start: datetime | None, end: datetime | None, size: int,
           limit: int) -> dict[str, Any]:
    """The bundle of `agent`'s entries in [start, end], proven against the checkpoint of `size`
    (which the caller has just signed)."""
    entries = AuditEntry.objects.filter(agent=agent, seq__lte=size)
    if start is not None:
        entries = entries.filter(at__gte=start)
    if end is not None:
        entries = entries.filter(at__lte=end)
    rows = list(entries.order_by("seq").values(*ENTRY_FIELDS)[:limit + 1])
    if len(rows) > limit:
        raise TooManyEntries(f"more than {limit} entries in the period; ask for a shorter one")
    items = proven_entries(rows, size)
    return {"format": EVIDENCE_FORMAT, "agent": agent,
            "from": format_time(start) if start else None,
            "to": format_time(end) if end else None,
            **signed_head(size), "entries": items}
