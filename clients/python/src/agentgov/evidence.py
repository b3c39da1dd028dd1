"""Offline verification of an evidence bundle (docs/audit-format.md): one agent's entries for a
period, each with an RFC 6962 inclusion proof to one signed checkpoint, checked without the rest
of the trail and without a server. Given a witness, every checkpoint it holds up to the bundle's
is proven to be a prefix of the bundle's tree (the bundle carries a consistency proof from each
checkpoint size the control plane knows): a bundle signed over a rewritten past contradicts the
witness even when the real key signed it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agentgov.audit import (
    DELETED,
    EDITED,
    EVIDENCE_FORMAT,
    GENESIS,
    REHASHED,
    REPORT_FORMAT,
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
from agentgov.entries import canonical_json, entry_leaf_hash
from agentgov.merkle import ProofError, verify_consistency, verify_inclusion


def _moment(text: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text) if isinstance(text, str) and text else None
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment and moment.tzinfo is None else moment


def proofs_by_size(consistency: Any) -> dict[int, list[str]]:
    """The bundle's consistency proofs, size -> hex proof (an unreadable list is edited)."""
    if consistency is None:
        return {}
    try:
        return {int(item["size"]): [str(h) for h in item["proof"]] for item in consistency}
    except (KeyError, TypeError, ValueError) as error:
        raise Failure(1, EDITED, "the bundle's consistency proofs are unreadable") from error


def check_witnessed(head: Mapping[str, Any], proofs: Mapping[int, list[str]],
                    witness: Mapping[int, Mapping[str, Any]],
                    keys: Mapping[str, Ed25519PublicKey]) -> list[str]:
    """Hold every witness checkpoint smaller than `head` against it: signed by a trusted key,
    and proven a prefix of the head's tree by the consistency proof for its size. Raise Failure
    with what contradicts; return what was shown (the larger ones are only counted: a bundle
    made before them cannot speak for them)."""
    size, root = head["size"], head.get("root")
    for before, copy in sorted(witness.items()):
        if not 0 < before < size:
            continue
        name = f"the witness's {checkpoint_name(copy)}"
        try:
            check_signature(copy, keys, before)
        except Failure as failure:
            raise Failure(before, WITNESS_MISMATCH if failure.reason == REHASHED
                          else failure.reason,
                          f"{name}: {failure.message} (another trail's witness, or a forged "
                          f"copy)") from None
        if before not in proofs:
            raise Failure(before, WITNESS_MISMATCH,
                          f"the bundle carries no consistency proof from {name} to its "
                          f"checkpoint {size}: nothing shows its entries extend what the "
                          f"witness saw (the control plane adds one for every checkpoint "
                          f"it holds: checkpoint {before} is missing from its trail)")
        try:
            verify_consistency(before, size, bytes.fromhex(str(copy.get("root"))),
                               bytes.fromhex(str(root)),
                               [bytes.fromhex(node) for node in proofs[before]])
        except (ProofError, ValueError) as error:
            raise Failure(before, WITNESS_MISMATCH,
                          f"the bundle's checkpoint {size} does not extend {name}: the trail "
                          f"was rewritten at or below entry {before} after the witness saw "
                          f"it") from error
    held = sum(1 for s in witness if 0 < s < size)
    later = sum(1 for s in witness if s > size)
    return [f"{held} earlier witness checkpoints proven consistent with it",
            *([f"{later} witness checkpoints larger than the bundle's are not held against it "
               f"(made after it)"] if later else [])]


def _check_checkpoint(checkpoint: Any, keys: Mapping[str, Ed25519PublicKey],
                      witness: Mapping[int, Mapping[str, Any]] | None,
                      bundle_proofs: Any = None) -> tuple[dict[str, Any], list[str]]:
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("size"), int):
        raise Failure(1, EDITED, "the bundle has no checkpoint")
    check_signature(checkpoint, keys, 1)
    shown: list[str] = []
    if witness is not None:
        shown = check_witnessed(checkpoint, proofs_by_size(bundle_proofs), witness, keys)
        copy = witness.get(checkpoint["size"])
        if copy is None:
            raise Failure(checkpoint["size"], WITNESS_MISSING,
                          f"the witness holds no copy of checkpoint {checkpoint['size']}")
        if signed_part(copy) != signed_part(checkpoint):
            raise Failure(checkpoint["size"], WITNESS_MISMATCH,
                          f"the bundle's checkpoint {checkpoint['size']} differs from the "
                          f"witness's copy")
    return checkpoint, shown


def _check_placed(item: Any, checkpoint: Mapping[str, Any], previous: int) -> dict[str, Any]:
    """The item's entry, after its order, its place under the checkpoint and its hash."""
    entry = item.get("entry") if isinstance(item, dict) else None
    seq = entry.get("seq") if isinstance(entry, dict) else None
    if not isinstance(seq, int) or seq <= previous:
        raise Failure(previous + 1, EDITED, f"the entry after seq {previous} is out of order")
    size = checkpoint["size"]
    if seq > size:
        raise Failure(seq, TRUNCATED, f"entry {seq} lies beyond the checkpoint's size {size}")
    if item.get("leaf_index") != seq - 1 or not entry_holds(entry, entry.get("prev_hash"), seq):
        raise Failure(seq, EDITED, f"entry {seq} does not match its hash")
    return entry


def _check_proof(item: Mapping[str, Any], entry: Mapping[str, Any],
                 checkpoint: Mapping[str, Any]) -> None:
    """The entry's inclusion proof to the root the checkpoint signed."""
    seq, size, root = entry["seq"], checkpoint["size"], checkpoint.get("root")
    try:
        proof = [bytes.fromhex(h) for h in item.get("proof", [])]
        verify_inclusion(seq - 1, size, entry_leaf_hash(entry), proof, bytes.fromhex(root))
    except (ProofError, TypeError, ValueError, KeyError) as error:
        raise Failure(seq, EDITED, f"entry {seq} or its proof does not match the root "
                                   f"{checkpoint_name(checkpoint)} signed") from error


def _check_item(item: Any, checkpoint: Mapping[str, Any], bundle: Mapping[str, Any],
                previous: int) -> int:
    entry = _check_placed(item, checkpoint, previous)
    seq = entry["seq"]
    if entry.get("agent") != bundle.get("agent"):
        raise Failure(seq, EDITED, f"entry {seq} is about another agent")
    at, start, end = _moment(entry.get("at")), _moment(bundle.get("from")), _moment(
        bundle.get("to"))
    if at is None or (start and at < start) or (end and at > end):
        raise Failure(seq, EDITED, f"entry {seq} lies outside the bundle's period")
    _check_proof(item, entry, checkpoint)
    return seq


def verify_bundle(bundle: Any, keys: Mapping[str, Ed25519PublicKey],
                  witness: Mapping[int, Mapping[str, Any]] | None = None) -> TrailCheck:
    """Each entry's inclusion in the signed tree, the checkpoint's signature and its witness."""
    count, last = 0, GENESIS
    try:
        if not isinstance(bundle, dict) or bundle.get("format") != EVIDENCE_FORMAT:
            raise Failure(1, EDITED, "the file is not a v1 evidence bundle")
        checkpoint, shown = _check_checkpoint(bundle.get("checkpoint"), keys, witness,
                                       bundle.get("consistency"))
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
    proven: tuple[str, ...] = (
        f"{count} entries of agent {bundle.get('agent')} from {bundle.get('from')} to "
        f"{bundle.get('to')} ({span}) proven by {checkpoint_name(checkpoint)}",)
    proven += tuple(shown)
    return TrailCheck(True, count, last, proven=proven, kind="evidence")


def _cited(report: Any) -> tuple[set[int], set[int]]:
    """The entry seqs and tree head sizes a framework report's items name."""
    seqs: set[int] = set()
    heads: set[int] = set()
    try:
        for control in report["controls"]:
            for query in control["queries"]:
                for item in query["items"]:
                    seqs.update(int(s) for s in item["entries"])
                    heads.update(int(h) for h in item["heads"])
    except (KeyError, TypeError, ValueError) as error:
        raise Failure(1, EDITED, "the report's controls are unreadable") from error
    return seqs, heads


def _check_report_entries(document: Mapping[str, Any], checkpoint: Mapping[str, Any],
                          digest: str) -> tuple[int, str, int]:
    """Every entry proven; the fetch's `audit.exported` entry recording the digest among
    them; every entry an item cites carried. Returns (count, last hash, the fetch's seq)."""
    report = document["report"]
    items = document.get("entries")
    if not isinstance(items, list):
        raise Failure(1, EDITED, "the bundle has no entry list")
    previous, count, last, fetched = 0, 0, GENESIS, 0
    for item in items:
        entry = _check_placed(item, checkpoint, previous)
        if report.get("agent") and entry.get("agent") != report["agent"]:
            raise Failure(entry["seq"], EDITED, f"entry {entry['seq']} is about another agent")
        _check_proof(item, entry, checkpoint)
        after = entry.get("after") if isinstance(entry.get("after"), dict) else {}
        if (entry.get("action") == "audit.exported" and after.get("digest") == digest
                and after.get("framework") == report.get("framework")):
            fetched = entry["seq"]
        previous, count, last = entry["seq"], count + 1, entry["hash"]
    if not fetched:
        raise Failure(checkpoint["size"], EDITED,
                      "no entry of the signed trail records this report's digest: the report "
                      "was changed after it was signed, or is not the one fetched")
    seqs, _ = _cited(report)
    missing = sorted(seqs - {item["entry"]["seq"] for item in items})
    if missing:
        raise Failure(missing[0], DELETED, f"entry {missing[0]}, which the report cites as "
                                           f"evidence, is not in the bundle")
    return count, last, fetched


def verify_report(document: Any, keys: Mapping[str, Ed25519PublicKey],
                  witness: Mapping[int, Mapping[str, Any]] | None = None) -> TrailCheck:
    """A framework report bundle: its checkpoint as an evidence bundle's; the report's SHA-256
    recorded by an entry proven under it; every cited entry proven; every cited tree head
    signed by a trusted key."""
    count, last = 0, GENESIS
    try:
        if not isinstance(document, dict) or document.get("format") != REPORT_FORMAT \
                or not isinstance(document.get("report"), dict):
            raise Failure(1, EDITED, "the file is not a v1 framework report bundle")
        checkpoint, shown = _check_checkpoint(document.get("checkpoint"), keys, witness,
                                              document.get("consistency"))
        digest = hashlib.sha256(canonical_json(document["report"]).encode("utf-8")).hexdigest()
        count, last, fetched = _check_report_entries(document, checkpoint, digest)
        _, sizes = _cited(document["report"])
        heads = {h.get("size"): h for h in document.get("heads") or [] if isinstance(h, dict)}
        for size in sorted(sizes):
            if size not in heads:
                raise Failure(size, DELETED, f"tree head {size}, which the report cites, is "
                                             f"not in the bundle")
            check_signature(heads[size], keys, size)
    except Failure as failure:
        return TrailCheck(False, count, last, failure.seq, failure.reason, failure.message,
                          kind="report")
    report = document["report"]
    colours = report.get("counts") or {}
    proven: tuple[str, ...] = (
        f"report {report.get('framework')} for {report.get('scope')} from {report.get('from')} "
        f"to {report.get('to')} ({colours.get('green', 0)} green, {colours.get('amber', 0)} "
        f"amber, {colours.get('red', 0)} red) recorded by entry {fetched}, proven by "
        f"{checkpoint_name(checkpoint)}",
        f"{count} entries it cites proven, {len(sizes)} tree heads it cites signed by a "
        f"trusted key", *shown)
    return TrailCheck(True, count, last, proven=proven, kind="report")
