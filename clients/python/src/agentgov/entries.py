"""Audit entries as docs/audit-format.md defines them: canonical JSON, the per-row chain hash
and the Merkle leaf. The control plane writes with these and the offline verifier checks with
them, so the two can never disagree."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from itertools import repeat
from operator import getitem, methodcaller
from typing import Any

from agentgov.merkle import leaf_hash

GENESIS_HASH = "0" * 64
HASHED_FIELDS = (
    "seq", "at", "actor", "action", "target", "agent",
    "before", "after", "reason", "request_id", "prev_hash",
)
ENTRY_FIELDS = (*HASHED_FIELDS, "hash")


def canonical_json(value: Any) -> str:
    """The one JSON spelling of a value: sorted keys, no spaces, UTF-8 text, no NaN."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def format_time(moment: datetime) -> str:
    """UTC ISO 8601 with microseconds and a Z, so the hashed text never depends on a zone."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def entry_hash(entry: Mapping[str, Any]) -> str:
    """The chain hash an entry must carry: sha256(canonical JSON of its fields + prev_hash)."""
    payload = canonical_json({name: entry[name] for name in HASHED_FIELDS})
    return hashlib.sha256((payload + entry["prev_hash"]).encode("utf-8")).hexdigest()


def entry_leaf_hash(entry: Mapping[str, Any]) -> bytes:
    """The entry's Merkle leaf hash: SHA-256(0x00 || canonical JSON of the whole exported entry)."""
    return leaf_hash(canonical_json({name: entry[name] for name in ENTRY_FIELDS}).encode("utf-8"))


# A stored payload's last top-level key before prev_hash is "before"; the leaf's object adds
# "hash" there. Only strings and a number follow the top-level prev_hash, and a JSON string can
# never hold an unescaped quote, so the last occurrence of this text is the top-level key.
PREV_HASH_KEY = ',"prev_hash":"'
_HEXDIGEST = methodcaller("hexdigest")
_LAST_PREV_HASH_KEY = methodcaller("rfind", PREV_HASH_KEY.encode())


def chain_hashes(payloads: Sequence[bytes], prev_hashes: Sequence[bytes]) -> list[str]:
    """entry_hash of each (payload, prev_hash), from payloads already in canonical JSON (UTF-8
    bytes, as stored), the loop in C (maps over hashlib and bytes): verify checks millions."""
    return list(map(_HEXDIGEST, map(hashlib.sha256, map(bytes.__add__, payloads, prev_hashes))))


def leaf_data(payloads: Sequence[bytes], hashes: Sequence[bytes]) -> list[bytes]:
    """The Merkle leaf's data of each entry (canonical JSON of the whole exported entry, as
    entry_leaf_hash builds it, UTF-8) from its payload and hash, without re-serialising: "hash"
    goes in before the top-level prev_hash. Every loop is a C map."""
    cuts = list(map((1).__add__, map(_LAST_PREV_HASH_KEY, payloads)))
    heads = map(getitem, payloads, map(slice, repeat(None), cuts))
    tails = map(getitem, payloads, map(slice, cuts, repeat(None)))
    pieces = zip(heads, repeat(b'"hash":"'), hashes, repeat(b'",'), tails, strict=False)
    return list(map(b"".join, pieces))
