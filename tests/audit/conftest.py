"""The audit tests' signing key: a fresh Ed25519 key in a file of the test's own, as an operator
would configure AUDIT_PRIVATE_KEY_FILE, so rotations never touch another test's key."""

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit.keys import write_key_file


@pytest.fixture(autouse=True)
def key_file(settings, tmp_path, monkeypatch) -> Path:
    path = tmp_path / "keys" / "audit-private-key.pem"
    write_key_file(path, Ed25519PrivateKey.generate())
    monkeypatch.setenv("AUDIT_PRIVATE_KEY_FILE", str(path))  # and the processes a test starts
    settings.AUDIT_PRIVATE_KEY = ""
    settings.AUDIT_PRIVATE_KEY_FILE = str(path)
    settings.AUDIT_PRIVATE_KEY_GENERATE = False
    return path
