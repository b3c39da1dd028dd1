"""Signed tree heads as docs/audit-format.md defines them: the message, the key id, and that a
checkpoint signed by one key fails under another, altered, or with its key unknown."""

import base64
import hashlib

import pytest
from agentgov import checkpoints
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def test_a_checkpoint_verifies_with_its_key_and_with_nothing_else(tmp_path):
    private = Ed25519PrivateKey.generate()
    public = private.public_key()
    published = checkpoints.published_key(public, "2026-11-30T18:00:00.000000Z")
    raw = base64.b64decode(published["public_key"])
    assert published["key_id"] == hashlib.sha256(raw).hexdigest()[:16]
    pem = tmp_path / "key.pem"
    pem.write_text(checkpoints.public_key_pem(public))
    for given in (published["public_key"], str(pem)):
        assert checkpoints.key_id(checkpoints.load_public_key(given)) == published["key_id"]

    signed = checkpoints.sign_checkpoint(private, 8, "ab" * 32, "2026-11-30T18:00:00.000000Z")
    assert checkpoints.checkpoint_message(8, "ab" * 32, signed["at"], signed["key_id"]) == (
        b'{"at":"2026-11-30T18:00:00.000000Z","key_id":"' + signed["key_id"].encode()
        + b'","log":"agentgov-audit/v1","root":"' + b"ab" * 32 + b'","size":8}')
    trusted = {published["key_id"]: public}
    checkpoints.verify_checkpoint(signed, trusted)

    with pytest.raises(checkpoints.UnknownKey):
        checkpoints.verify_checkpoint(signed, {})
    other = Ed25519PrivateKey.generate()
    forged = checkpoints.sign_checkpoint(other, 8, "ab" * 32, signed["at"])
    with pytest.raises(checkpoints.SignatureError):
        checkpoints.verify_checkpoint({**forged, "key_id": signed["key_id"]}, trusted)
    for field, value in (("size", 7), ("root", "cd" * 32), ("at", "2026-11-30T18:00:01Z")):
        with pytest.raises(checkpoints.SignatureError):
            checkpoints.verify_checkpoint({**signed, field: value}, trusted)


def test_a_rotation_is_vouched_for_by_the_old_key():
    old, new = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    new_key = checkpoints.published_key(new.public_key(), "2026-11-30T18:00:00.000000Z")
    signature = checkpoints.sign_rotation(old, new_key)
    checkpoints.verify_rotation(old.public_key(), {**new_key, "retired_at": "later"}, signature)
    with pytest.raises(checkpoints.SignatureError):
        checkpoints.verify_rotation(new.public_key(), new_key, signature)
