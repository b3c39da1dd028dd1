"""Offline verification of an evidence bundle (docs/audit-format.md): one agent's entries for a
period, each with an RFC 6962 inclusion proof to one signed checkpoint, checked without the rest
of the trail and without a server."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agentgov.audit import (
    EDITED,
    EVIDENCE_FORMAT,
    GENESIS,
    TRUNCATED,
    WITNESS_MISMATCH,
    WITNESS_MISSING,
    Failure,
    TrailCheck,
    check_signature,
    checkpoint_name,
    entry_holds,
    signed_part,
)
from agentgov.entries import entry_leaf_hash
from agentgov.merkle import ProofError, verify_inclusion


def _moment(text: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text) if isinstance(text, str) and text else None
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment and moment.tzinfo is None else moment


def _check_checkpoint(checkpoint: Any, keys: Mapping[str, Ed25519PublicKey],
                      witness: Mapping[int, Mapping[str, Any]] | None) -> dict[str, Any]:
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("size"), int):
        raise Failure(1, EDITED, "the bundle has no checkpoint")
    check_signature(checkpoint, keys, 1)
    if witness is not None:
        copy = witness.get(checkpoint["size"])
        if copy is None:
            raise Failure(checkpoint["size"], WITNESS_MISSING,
                          f"the witness holds no copy of checkpoint {checkpoint['size']}")
        if signed_part(copy) != signed_part(checkpoint):
            raise Failure(checkpoint["size"], WITNESS_MISMATCH,
                          f"the bundle's checkpoint {checkpoint['size']} differs from the "
                          f"witness's copy")
    return checkpoint


def _check_item(item: Any, checkpoint: Mapping[str, Any], bundle: Mapping[str, Any],
                previous: int) -> int:
    entry = item.get("entry") if isinstance(item, dict) else None
    seq = entry.get("seq") if isinstance(entry, dict) else None
    if not isinstance(seq, int) or seq <= previous:
        raise Failure(previous + 1, EDITED, f"the entry after seq {previous} is out of order")
    size, root = checkpoint["size"], checkpoint.get("root")
    if seq > size:
        raise Failure(seq, TRUNCATED, f"entry {seq} lies beyond the checkpoint's size {size}")
    if item.get("leaf_index") != seq - 1 or not entry_holds(entry, entry.get("prev_hash"), seq):
        raise Failure(seq, EDITED, f"entry {seq} does not match its hash")
    if entry.get("agent") != bundle.get("agent"):
        raise Failure(seq, EDITED, f"entry {seq} is about another agent")
    at, start, end = _moment(entry.get("at")), _moment(bundle.get("from")), _moment(
        bundle.get("to"))
    if at is None or (start and at < start) or (end and at > end):
        raise Failure(seq, EDITED, f"entry {seq} lies outside the bundle's period")
    try:
        proof = [bytes.fromhex(h) for h in item.get("proof", [])]
        verify_inclusion(seq - 1, size, entry_leaf_hash(entry), proof, bytes.fromhex(root))
    except (ProofError, TypeError, ValueError, KeyError) as error:
        raise Failure(seq, EDITED, f"entry {seq} or its proof does not match the root "
                                   f"{checkpoint_name(checkpoint)} signed") from error
    return seq


def verify_bundle(bundle: Any, keys: Mapping[str, Ed25519PublicKey],
                  witness: Mapping[int, Mapping[str, Any]] | None = None) -> TrailCheck:
    """Each entry's inclusion in the signed tree, the checkpoint's signature and its witness."""
    count, last = 0, GENESIS
    try:
        if not isinstance(bundle, dict) or bundle.get("format") != EVIDENCE_FORMAT:
            raise Failure(1, EDITED, "the file is not a v1 evidence bundle")
        checkpoint = _check_checkpoint(bundle.get("checkpoint"), keys, witness)
        items = bundle.get("entries")
        if not isinstance(items, list):
            raise Failure(1, EDITED, "the bundle has no entry list")
        previous = 0
        for item in items:
            previous = _check_item(item, checkpoint, bundle, previous)
            count, last = count + 1, item["entry"]["hash"]
    except Failure as failure:
        return TrailCheck(False, count, last, failure.seq, failure.reason, failure.message,
                          kind="evidence")
    seqs = [item["entry"]["seq"] for item in items]
    span = f"seq {seqs[0]}-{seqs[-1]}" if seqs else "no entries"
    proven = (f"{count} entries of agent {bundle.get('agent')} from {bundle.get('from')} to "
              f"{bundle.get('to')} ({span}) proven by {checkpoint_name(checkpoint)}",)
    return TrailCheck(True, count, last, proven=proven, kind="evidence")
