"""Ed25519 keys and signed tree heads (checkpoints), as docs/audit-format.md defines them.

The control plane signs with these; the offline verifier checks with the public half only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agentgov.entries import canonical_json

LOG_NAME = "agentgov-audit/v1"
ALGORITHM = "ed25519"
SIGNED_FIELDS = ("size", "root", "at", "key_id")
KEY_LIST_FORMAT = "agentgov-trusted-keys/v1"
# key id -> (introduced_at_size, retired_at_size): the key may sign a tree of size n only when
# introduced_at_size < n (0: from the start) and n <= retired_at_size (None: no end yet).
KeyRanges = dict[str, tuple[int, int | None]]


class SignatureError(ValueError):
    """A checkpoint or key statement whose signature does not hold, or names an unknown key."""


class UnknownKey(SignatureError):
    """The checkpoint names a key id the verifier was not given."""


class RetiredKey(SignatureError):
    """A trusted key signed a tree size outside the range it may sign (after its retirement,
    or before its introduction)."""


def raw_public_key(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """The first 16 hex characters of SHA-256 of the raw 32-byte public key."""
    return hashlib.sha256(raw_public_key(key)).hexdigest()[:16]


def published_key(key: Ed25519PublicKey, created_at: str,
                  retired_at: str | None = None) -> dict[str, Any]:
    """The form a public key is served, exported and rotated in."""
    return {
        "key_id": key_id(key),
        "algorithm": ALGORITHM,
        "public_key": base64.b64encode(raw_public_key(key)).decode("ascii"),
        "created_at": created_at,
        "retired_at": retired_at,
    }


def public_key_from_base64(text: str) -> Ed25519PublicKey:
    """A key's published form: base64 of its raw 32 bytes (ValueError otherwise)."""
    try:
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(text, validate=True))
    except binascii.Error as error:
        raise ValueError("not base64 of a raw Ed25519 public key") from error


def load_public_key(text_or_path: str) -> Ed25519PublicKey:
    """A public key from base64 of its raw 32 bytes, or from a PEM (SubjectPublicKeyInfo) file."""
    text = text_or_path.strip()
    if "BEGIN PUBLIC KEY" not in text:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == 32:
            return Ed25519PublicKey.from_public_bytes(raw)
        path = Path(text_or_path).expanduser()
        if not path.is_file():
            raise ValueError("expected base64 of a raw 32-byte Ed25519 public key or a PEM file")
        text = path.read_text(encoding="utf-8")
    key = serialization.load_pem_public_key(text.encode("utf-8"))
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("the PEM file does not hold an Ed25519 public key")
    return key


def load_private_key(pem_or_raw: str | bytes) -> Ed25519PrivateKey:
    """The signing key from a PKCS#8 PEM or base64 of its raw 32-byte seed."""
    data = pem_or_raw.encode("utf-8") if isinstance(pem_or_raw, str) else pem_or_raw
    if b"PRIVATE KEY" in data:
        key = serialization.load_pem_private_key(data, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError("the PEM does not hold an Ed25519 private key")
        return key
    raw = base64.b64decode(data.strip(), validate=True)
    return Ed25519PrivateKey.from_private_bytes(raw)


def public_key_pem(key: Ed25519PublicKey) -> str:
    return key.public_bytes(serialization.Encoding.PEM,
                            serialization.PublicFormat.SubjectPublicKeyInfo).decode("ascii")


def checkpoint_message(size: int, root: str, at: str, key: str) -> bytes:
    """What a checkpoint signs: canonical JSON of the log name, size, root, time and key id."""
    return canonical_json({"log": LOG_NAME, "size": size, "root": root, "at": at,
                           "key_id": key}).encode("utf-8")


def sign_checkpoint(private: Ed25519PrivateKey, size: int, root: str, at: str) -> dict[str, Any]:
    """A signed tree head over `size` leaves with Merkle root `root` (lowercase hex)."""
    kid = key_id(private.public_key())
    signature = private.sign(checkpoint_message(size, root, at, kid))
    return {"size": size, "root": root, "at": at, "key_id": kid, "algorithm": ALGORITHM,
            "signature": base64.b64encode(signature).decode("ascii")}


def _check(key: Ed25519PublicKey, signature: str, message: bytes, what: str) -> None:
    try:
        key.verify(base64.b64decode(signature, validate=True), message)
    except (InvalidSignature, binascii.Error, ValueError, TypeError) as error:
        raise SignatureError(f"the signature on {what} does not hold") from error


def verify_checkpoint(checkpoint: Mapping[str, Any], keys: Mapping[str, Ed25519PublicKey],
                      ranges: Mapping[str, tuple[int, int | None]] | None = None) -> None:
    """Raise UnknownKey, RetiredKey or SignatureError unless a trusted key signed exactly these
    fields, at a tree size the key may sign (`ranges`; a key without one signs any size)."""
    if checkpoint.get("algorithm") != ALGORITHM:
        raise SignatureError(f"checkpoint algorithm {checkpoint.get('algorithm')!r} is not "
                             f"verifiable offline")
    kid = checkpoint.get("key_id")
    key = keys.get(kid) if isinstance(kid, str) else None
    if key is None:
        raise UnknownKey(f"checkpoint signed by key {kid!r}, which is not a trusted key")
    try:
        message = checkpoint_message(*(checkpoint[name] for name in SIGNED_FIELDS))
    except (KeyError, TypeError, ValueError) as error:
        raise SignatureError("the checkpoint lacks a signed field") from error
    _check(key, str(checkpoint.get("signature", "")), message,
           f"the checkpoint of size {checkpoint.get('size')}")
    check_range(checkpoint, (ranges or {}).get(kid))


def check_range(checkpoint: Mapping[str, Any], limits: tuple[int, int | None] | None) -> None:
    """Raise RetiredKey when the checkpoint's size lies outside what its key may sign."""
    if limits is None:
        return
    size, (introduced, retired) = checkpoint.get("size"), limits
    if not isinstance(size, int):
        raise SignatureError("the checkpoint has no valid size")
    if retired is not None and size > retired:
        raise RetiredKey(f"checkpoint {size} is signed by key {checkpoint.get('key_id')!r}, "
                         f"retired at tree size {retired}: it may sign nothing larger")
    if size <= introduced:
        raise RetiredKey(f"checkpoint {size} is signed by key {checkpoint.get('key_id')!r}, "
                         f"introduced at tree size {introduced}: it may sign only larger trees")


def key_list(keys: Mapping[str, Ed25519PublicKey], ranges: Mapping[str, tuple[int, int | None]]
             ) -> dict[str, Any]:
    """The trusted key list document (docs/audit-format.md, "Trusted keys")."""
    listed = []
    for kid, key in keys.items():
        introduced, retired = ranges.get(kid, (0, None))
        listed.append({"key_id": kid, "algorithm": ALGORITHM,
                       "public_key": base64.b64encode(raw_public_key(key)).decode("ascii"),
                       "introduced_at_size": introduced, "retired_at_size": retired})
    return {"format": KEY_LIST_FORMAT, "keys": listed}


def parse_key_list(text: str) -> tuple[dict[str, Ed25519PublicKey], KeyRanges]:
    """Keys and their ranges from a trusted key list; ValueError (naming what is wrong) for
    anything it cannot read exactly: a misspelled field, a size that is not a whole number."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ValueError(f"the trusted key list is not JSON: {error}") from None
    if not isinstance(document, dict) or document.get("format") != KEY_LIST_FORMAT:
        raise ValueError(f"the trusted key list must be an object with format "
                         f"{KEY_LIST_FORMAT!r}")
    if set(document) != {"format", "keys"} or not isinstance(document["keys"], list):
        raise ValueError("the trusted key list has exactly the fields format and keys (a list)")
    keys: dict[str, Ed25519PublicKey] = {}
    ranges: KeyRanges = {}
    allowed = {"key_id", "algorithm", "public_key", "introduced_at_size", "retired_at_size",
               "note"}
    for number, item in enumerate(document["keys"]):
        where = f"/keys/{number}"
        if not isinstance(item, dict) or not set(item) <= allowed or "public_key" not in item:
            raise ValueError(f"{where}: expected public_key, and optionally key_id, algorithm, "
                             f"introduced_at_size, retired_at_size, note")
        if item.get("algorithm", ALGORITHM) != ALGORITHM:
            raise ValueError(f"{where}/algorithm: expected {ALGORITHM!r}")
        key = public_key_from_base64(str(item["public_key"]))
        kid = key_id(key)
        if item.get("key_id", kid) != kid:
            raise ValueError(f"{where}/key_id: the public key's id is {kid}")
        introduced, retired = item.get("introduced_at_size", 0), item.get("retired_at_size")
        if type(introduced) is not int or introduced < 0:
            raise ValueError(f"{where}/introduced_at_size: expected a whole number >= 0")
        if retired is not None and (type(retired) is not int or retired <= introduced):
            raise ValueError(f"{where}/retired_at_size: expected null or a whole number "
                             f"larger than introduced_at_size")
        if kid in keys:
            raise ValueError(f"{where}: key {kid} is listed twice")
        keys[kid], ranges[kid] = key, (introduced, retired)
    return keys, ranges


def rotation_message(new_key: Mapping[str, Any]) -> bytes:
    """What the old key signs on rotation: the new key's published form without retired_at."""
    return canonical_json({k: v for k, v in new_key.items() if k != "retired_at"}).encode("utf-8")


def sign_rotation(old: Ed25519PrivateKey, new_key: Mapping[str, Any]) -> str:
    return base64.b64encode(old.sign(rotation_message(new_key))).decode("ascii")


def verify_rotation(old: Ed25519PublicKey, new_key: Mapping[str, Any], signature: str) -> None:
    """Raise SignatureError unless the old key vouched for the new one."""
    _check(old, signature, rotation_message(new_key), f"key {new_key.get('key_id')!r}")
