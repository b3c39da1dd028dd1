"""The Ed25519 key that signs checkpoints: read from outside the database on every use (so a
rotated key file takes effect at once), generated into var/ under DEBUG only; and the trusted key
list (AUDIT_TRUSTED_KEYS_FILE) verify takes every public key from, each with the tree sizes it may
sign: configuration, never the database. The key formats and signatures are the client package's
`agentgov.checkpoints`, shared with the offline side."""

import json
import os
from pathlib import Path

from agentgov import checkpoints
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def write_key_file(path: Path, key: Ed25519PrivateKey, *, replace: bool = False) -> None:
    """Write a private key readable by its owner only; never over an existing file unless
    `replace`, and then by an atomic rename so no reader sees half a key."""
    path.parent.mkdir(parents=True, exist_ok=True)
    target = path.with_name(path.name + ".new") if replace else path
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(private_key_pem(key))
    if replace:
        os.replace(target, path)


def key_file() -> Path | None:
    """The file the private key is read from (None when it comes from the environment)."""
    return None if settings.AUDIT_PRIVATE_KEY else Path(settings.AUDIT_PRIVATE_KEY_FILE)


def signing_key() -> Ed25519PrivateKey:
    """The current private key; under DEBUG one is generated into var/ on first use."""
    path = key_file()
    try:
        if path is None:
            return checkpoints.load_private_key(settings.AUDIT_PRIVATE_KEY)
        if settings.AUDIT_PRIVATE_KEY_GENERATE and not path.exists():
            made = Ed25519PrivateKey.generate()
            try:
                write_key_file(path, made)
            except FileExistsError:
                pass  # another process made it first: use theirs
            else:
                _trust_generated(made.public_key())
        return checkpoints.load_private_key(path.read_bytes())
    except (OSError, ValueError) as error:
        raise ImproperlyConfigured(f"the audit private key is not usable: {error}") from None


def trusted_keys_file() -> Path | None:
    """Where the trusted key list is configured: AUDIT_TRUSTED_KEYS_FILE, else trusted-keys.json
    beside the private key file (None when the key comes from the environment and no list is
    configured: only the signing key is trusted)."""
    if settings.AUDIT_TRUSTED_KEYS_FILE:
        return Path(settings.AUDIT_TRUSTED_KEYS_FILE)
    if settings.AUDIT_PRIVATE_KEY_FILE:
        return Path(settings.AUDIT_PRIVATE_KEY_FILE).parent / "trusted-keys.json"
    return None


def trusted() -> tuple[dict[str, Ed25519PublicKey], checkpoints.KeyRanges]:
    """The keys verify trusts and the tree sizes each may sign, from the configured list; with
    no list file, the current signing key alone, for every size. Never from the database."""
    path = trusted_keys_file()
    if path is not None and path.exists():
        try:
            return checkpoints.parse_key_list(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ImproperlyConfigured(f"the trusted key list {path} is not usable: "
                                       f"{error}") from None
    current = signing_key().public_key()
    return {checkpoints.key_id(current): current}, {}


def write_trusted(keys: dict[str, Ed25519PublicKey], ranges: checkpoints.KeyRanges) -> None:
    """Replace the trusted key list file at once (atomic rename), owner-only as var/ is (it
    holds public keys only: the operator may publish it)."""
    path = trusted_keys_file()
    if path is None:
        raise ImproperlyConfigured("set AUDIT_TRUSTED_KEYS_FILE: a rotation must be recorded "
                                   "in the trusted key list, outside the database")
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(path.name + ".new")
    descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(json.dumps(checkpoints.key_list(keys, ranges), indent=2) + "\n")
    os.replace(staged, path)


def _trust_generated(public: Ed25519PublicKey) -> None:
    """A development key just generated is the whole trusted list (unless one is there)."""
    path = trusted_keys_file()
    if path is not None and not path.exists():
        write_trusted({checkpoints.key_id(public): public}, {})


def retire(old: Ed25519PublicKey, new: Ed25519PublicKey, size: int) -> None:
    """Record a rotation in the trusted key list: `old` signs nothing larger than `size` (its
    checkpoint covering the rotation entry), `new` only larger trees."""
    listed, ranges = trusted()
    old_id, new_id = checkpoints.key_id(old), checkpoints.key_id(new)
    listed[old_id] = old
    introduced, retired = ranges.get(old_id, (0, None))
    ranges[old_id] = (introduced, size if retired is None else min(retired, size))
    listed[new_id], ranges[new_id] = new, (size, None)
    write_trusted(listed, ranges)
