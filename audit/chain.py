"""The hash chain: the entry hashing lives in the client package (agentgov.entries), which the
offline verifier shares, so the database and an exported file are checked by the same code.
"""

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from agentgov.entries import (  # noqa: F401  (re-exported: one implementation, in the client)
    GENESIS_HASH,
    HASHED_FIELDS,
    PREV_HASH_KEY,
    canonical_json,
    entry_hash,
    format_time,
)


def entry_payload(entry: Mapping[str, Any]) -> str:
    """The canonical JSON the chain hash covers (entry_hash hashes it followed by prev_hash)."""
    return canonical_json({name: entry[name] for name in HASHED_FIELDS})


def chain_hash(payload: str, prev_hash: str) -> str:
    """The chain hash over a stored payload: the same bytes agentgov.entries.entry_hash hashes."""
    return hashlib.sha256((payload + prev_hash).encode()).hexdigest()


def leaf_bytes(payload: str, hash_: str) -> bytes:
    """The Merkle leaf's data (canonical JSON of the whole exported entry, as
    agentgov.entries.entry_leaf_hash builds it) from the stored payload, without re-serialising."""
    cut = payload.rfind(PREV_HASH_KEY) + 1
    return f'{payload[:cut]}"hash":"{hash_}",{payload[cut:]}'.encode()


def checkpoint_signature(key: str, seq: int, head_hash: str) -> str:
    """Legacy (pre-Ed25519) HMAC-SHA256 over a chain position, keyed outside the database."""
    message = f"{seq}:{head_hash}".encode()
    return hmac.new(key.encode("utf-8"), message, hashlib.sha256).hexdigest()


@dataclass
class ChainReport:
    """The outcome of walking a chain: ok, or where it first breaks and why."""

    ok: bool
    count: int
    head_hash: str
    first_broken_seq: int | None = None
    problem: str | None = None
    checkpoints: int = 0
    reason: str | None = None  # a BreakReason word when not ok
    root: str | None = None  # the Merkle root over the `count` entries
    pending: int = 0  # entries written but not yet sequenced

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verify_entries(
    entries: Iterable[Mapping[str, Any]],
    *,
    checkpoints: Mapping[int, str] | None = None,
) -> ChainReport:
    """Walk entries in seq order from seq 1; `checkpoints` maps signed seq -> head hash.

    Each entry must have the next seq, link to its predecessor's hash and hash to what it
    carries; each checkpointed seq must still carry the signed hash (a chain rewritten and
    re-hashed from some entry on fails there).
    """
    checkpoints = dict(checkpoints or {})
    expected_seq, previous, count = 1, GENESIS_HASH, 0
    for entry in entries:
        seq = entry["seq"]
        if seq != expected_seq:
            problem = (
                f"entry {expected_seq} is missing (next entry is {seq})"
                if seq > expected_seq
                else f"entry {seq} appears out of order after entry {expected_seq - 1}"
            )
            return ChainReport(False, count, previous, expected_seq, problem)
        if entry["prev_hash"] != previous:
            return ChainReport(
                False, count, previous, seq, f"entry {seq} does not link to entry {seq - 1}"
            )
        if entry_hash(entry) != entry["hash"]:
            return ChainReport(
                False, count, previous, seq, f"entry {seq} does not match its hash"
            )
        signed = checkpoints.pop(seq, None)
        if signed is not None and signed != entry["hash"]:
            return ChainReport(
                False, count, previous, seq,
                f"entry {seq} differs from the signed checkpoint: the chain was rewritten",
            )
        previous = entry["hash"]
        count += 1
        expected_seq += 1
    if checkpoints:
        missing = min(checkpoints)
        return ChainReport(
            False, count, previous, expected_seq,
            f"a signed checkpoint covers entry {missing} but the chain ends at {count}",
        )
    return ChainReport(True, count, previous)
