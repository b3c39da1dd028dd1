"""The trail's v1 formats (docs/audit-format.md) as the control plane uses them: key ids,
checkpoint messages and RFC 6962 hashing. TEMPORARY: replaced by the client package's pure
module once merged, so one implementation serves the server and the offline verifier."""

import hashlib
from typing import Any

from audit.chain import canonical_json

LOG_ID = "agentgov-audit/v1"
EMPTY_ROOT = hashlib.sha256(b"").hexdigest()


def key_id(public_raw: bytes) -> str:
    return hashlib.sha256(public_raw).hexdigest()[:16]


def checkpoint_message(size: int, root: str, at: str, key: str) -> bytes:
    body = {"log": LOG_ID, "size": size, "root": root, "at": at, "key_id": key}
    return canonical_json(body).encode("utf-8")


def leaf_hash(entry: dict[str, Any]) -> str:
    return hashlib.sha256(b"\x00" + canonical_json(entry).encode("utf-8")).hexdigest()


def node_hash(left: str, right: str) -> str:
    return hashlib.sha256(b"\x01" + bytes.fromhex(left) + bytes.fromhex(right)).hexdigest()
