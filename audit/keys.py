"""The Ed25519 key that signs checkpoints: read from outside the database on every use (so a
rotated key file takes effect at once), generated into var/ under DEBUG only. The key formats
and signatures are the client package's `agentgov.checkpoints`, shared with the offline side."""

import os
from pathlib import Path

from agentgov import checkpoints
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
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
            try:
                write_key_file(path, Ed25519PrivateKey.generate())
            except FileExistsError:
                pass  # another process made it first: use theirs
        return checkpoints.load_private_key(path.read_bytes())
    except (OSError, ValueError) as error:
        raise ImproperlyConfigured(f"the audit private key is not usable: {error}") from None
