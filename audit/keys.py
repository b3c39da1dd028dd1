"""The Ed25519 key that signs checkpoints: read from outside the database on every use, so a
rotated key file takes effect at once, and published by its id."""

import base64
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from audit.formats import key_id

def parse_private_key(text: str) -> Ed25519PrivateKey:
    """A private key from PEM (PKCS#8) text or the base64 of its raw 32 bytes."""
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_private_key(text.encode(), password=None)
        else:
            key = Ed25519PrivateKey.from_private_bytes(base64.b64decode(text, validate=True))
    except ValueError as error:
        raise ImproperlyConfigured(f"the audit private key is not a usable key: {error}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ImproperlyConfigured("the audit private key must be an Ed25519 key")
    return key


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def write_key_file(path: Path, key: Ed25519PrivateKey) -> None:
    """Write a private key readable by its owner only; never over an existing file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(private_key_pem(key))


def key_file() -> Path | None:
    """The file the private key is read from (None when it comes from the environment)."""
    if settings.AUDIT_PRIVATE_KEY:
        return None
    return Path(settings.AUDIT_PRIVATE_KEY_FILE)


def signing_key() -> Ed25519PrivateKey:
    """The current private key; under DEBUG one is generated into var/ on first use."""
    path = key_file()
    if path is None:
        return parse_private_key(settings.AUDIT_PRIVATE_KEY)
    if settings.AUDIT_PRIVATE_KEY_GENERATE and not path.exists():
        try:
            write_key_file(path, Ed25519PrivateKey.generate())
        except FileExistsError:
            pass  # another process made it first: use theirs
    try:
        return parse_private_key(path.read_text())
    except OSError as error:
        raise ImproperlyConfigured(f"cannot read the audit private key: {error}") from None


def public_raw(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    """The raw 32 bytes of a key's public half."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_base64(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    return base64.b64encode(public_raw(key)).decode()


def current_key_id() -> str:
    return key_id(public_raw(signing_key()))


def sign(key: Ed25519PrivateKey, message: bytes) -> str:
    """The base64 Ed25519 signature of `message`."""
    return base64.b64encode(key.sign(message)).decode()


def signature_holds(public_key_b64: str, message: bytes, signature_b64: str) -> bool:
    """True when `signature_b64` is the holder of that public key's signature of `message`."""
    try:
        public = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key_b64))
        public.verify(base64.b64decode(signature_b64), message)
    except (InvalidSignature, ValueError):
        return False
    return True
