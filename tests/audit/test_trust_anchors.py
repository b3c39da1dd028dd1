"""Issue 28 on the server: trust is anchored outside the database. An operator with the
database cannot get `GET /api/v1/audit/verify` to say ok by vouching for a key of their own
in a forged rotation, by re-signing past a rotation with the retired key, or by editing the key
table; and the real key refuses to sign a head that does not extend the last one it signed."""

import io
import json

import pytest
from agentgov import checkpoints as signed_heads
from agentgov import merkle
from agentgov.entries import entry_leaf_hash
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import CommandError, call_command
from django.db import connection

import audit
from audit import keys, signer, tree
from audit.actions import rotate_key
from audit.chain import format_time
from audit.choices import AuditAction
from audit.models import AuditChainHead, AuditCheckpoint, AuditEntry
from audit.verify import fetch_chunk, verify_trail
from tests.audit.test_tamper import rewrite_from, sql

pytestmark = pytest.mark.django_db
EVERY = 4


@pytest.fixture
def signed(settings, django_capture_on_commit_callbacks):
    """Ten entries, checkpoints at 4 and 8 (the signer remembers 8), no witness; the
    append-only triggers off, as a database superuser would have them."""
    settings.AUDIT_CHECKPOINT_EVERY = EVERY
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(10):
            audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}")
    if connection.vendor == "postgresql":
        for table in ("auditentry", "auditcheckpoint", "audittreenode", "auditkey"):
            sql(f"ALTER TABLE audit_{table} DISABLE TRIGGER USER")
    assert signer.last_signed()["size"] == 8
    assert verify_trail().ok


def rebuild_tree() -> list[dict]:
    """What a thorough attacker does after rewriting entries: the stored Merkle tree remade
    from them, so roots and proofs served match the forgery."""
    rows = fetch_chunk(0, 1000)
    sql("DELETE FROM audit_audittreenode")
    tree.append_leaves(0, [entry_leaf_hash(row) for row in rows])
    return rows


def forge_checkpoint(size: int, private: Ed25519PrivateKey, rows: list[dict]) -> None:
    """Sign the forged tree at `size` with `private` and store it as that size's checkpoint."""
    root = merkle.root([entry_leaf_hash(row) for row in rows[:size]]).hex()
    made = signed_heads.sign_checkpoint(private, size, root, "2026-01-01T00:00:00.000000Z")
    sql("DELETE FROM audit_auditcheckpoint WHERE seq = %s", [size])
    sql("INSERT INTO audit_auditcheckpoint (seq, head_hash, root, at, key_id, algorithm, "
        "signature) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        [size, rows[size - 1]["hash"], root, "2026-01-01T00:00:00+00:00", made["key_id"],
         "ed25519", made["signature"]])


def verify_api(people, api_as) -> dict:
    return api_as(people.dana).get("/api/v1/audit/verify").json()


# --- 2. a key the attacker made ---------------------------------------------------------------


def test_a_forged_rotation_vouching_for_the_attackers_key_is_not_trusted(
        signed, people, api_as, settings):
    settings.AUDIT_CHECKPOINT_EVERY = 1000  # the attacker signs by hand
    rewrite_from(2)
    rebuild_tree()
    mallory = Ed25519PrivateKey.generate()
    real = keys.signing_key()
    # The forged rotation: mallory's key "retires" for the real one, signed by mallory itself.
    now = format_time(AuditEntry.objects.get(seq=10).at)
    introduced = signed_heads.published_key(real.public_key(), now)
    audit.record(actor="system:manage.py", action=AuditAction.KEY_ROTATED,
                 target=f"audit-key:{introduced['key_id']}",
                 before=signed_heads.published_key(mallory.public_key(), now),
                 after={**introduced, "previous_key_id": signed_heads.key_id(mallory.public_key()),
                        "signature_by_previous": signed_heads.sign_rotation(mallory, introduced)})
    rows = fetch_chunk(0, 1000)
    for size in (4, 8, 11):
        forge_checkpoint(size, mallory, rows)
    sql("INSERT INTO audit_auditkey (key_id, algorithm, public_key, created_at) VALUES "
        "(%s, 'ed25519', %s, '2026-01-01T00:00:00+00:00')",
        [signed_heads.key_id(mallory.public_key()),
         signed_heads.published_key(mallory.public_key(), now)["public_key"]])

    report = verify_api(people, api_as)
    assert (report["ok"], report["first_broken_seq"], report["reason"]) == (False, 1,
                                                                           "unknown-key")
    assert f"{signed_heads.key_id(mallory.public_key())!r}, which is not a trusted key" in (
        report["problem"])


# --- 3. a retired key proves for ever ---------------------------------------------------------


def test_past_its_rotation_the_retired_key_signs_nothing_the_server_accepts(
        signed, people, api_as, settings, key_file, django_capture_on_commit_callbacks):
    old = keys.signing_key()
    new = Ed25519PrivateKey.generate()
    with django_capture_on_commit_callbacks(execute=True):
        rotation = rotate_key(actor=people.dana, new_key=new)
    keys.write_key_file(key_file, new, replace=True)
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(6):
            audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"later:{i}")
    listed = json.loads((key_file.parent / "trusted-keys.json").read_text())
    assert [(k["key_id"], k["introduced_at_size"], k["retired_at_size"]) for k in
            listed["keys"]] == [(signed_heads.key_id(old.public_key()), 0, rotation.seq),
                                (signed_heads.key_id(new.public_key()), rotation.seq, None)]
    assert verify_api(people, api_as)["ok"]

    # The leaked old key re-signs a checkpoint past the rotation (the same root, even).
    later = AuditCheckpoint.objects.filter(seq__gt=rotation.seq).order_by("seq").first()
    resigned = signed_heads.sign_checkpoint(old, later.seq, later.root, format_time(later.at))
    sql("UPDATE audit_auditcheckpoint SET key_id = %s, signature = %s WHERE seq = %s",
        [resigned["key_id"], resigned["signature"], later.seq])
    # And the key table is edited to say the old key was never retired: nothing trusts it.
    sql("UPDATE audit_auditkey SET retired_at = NULL")
    report = verify_api(people, api_as)
    assert (report["ok"], report["first_broken_seq"], report["reason"]) == (
        False, rotation.seq + 1, "retired-key")
    assert f"retired at tree size {rotation.seq}: it may sign nothing larger" in (
        report["problem"])


def test_the_trusted_key_list_is_served_for_auditors_from_configuration(
        signed, people, api_as, key_file):
    served = api_as(people.dana).get("/api/v1/audit/trusted-keys").json()
    assert served == signed_heads.key_list(*keys.trusted())
    printed = io.StringIO()
    call_command("audit", "trusted-keys", stdout=printed)
    assert json.loads(printed.getvalue()) == served
    assert served["keys"][0]["key_id"] == signed_heads.key_id(keys.signing_key().public_key())
    sql("DELETE FROM audit_auditkey")  # the database's key table plays no part
    assert api_as(people.dana).get("/api/v1/audit/trusted-keys").json() == served


def test_a_trusted_key_list_that_cannot_be_read_exactly_is_refused(settings, tmp_path):
    path = tmp_path / "trusted-keys.json"
    settings.AUDIT_TRUSTED_KEYS_FILE = str(path)
    public = signed_heads.published_key(Ed25519PrivateKey.generate().public_key(), "")
    for document, words in [
        ({"format": "agentgov-trusted-keys/v1", "keys": [
            {"public_key": public["public_key"], "retired_at_size": "12"}]},
         "/keys/0/retired_at_size"),
        ({"format": "agentgov-trusted-keys/v1", "keys": [
            {"public_key": public["public_key"], "retird_at_size": 12}]}, "/keys/0"),
        ({"format": "agentgov-trusted-keys/v1", "keys": [
            {"public_key": public["public_key"], "key_id": "0" * 16}]}, "/keys/0/key_id"),
        ({"keys": []}, "format"),
    ]:
        path.write_text(json.dumps(document))
        with pytest.raises(Exception, match=words):
            keys.trusted()


# --- 4. the real key signs rewritten history --------------------------------------------------


def test_the_signer_refuses_to_sign_a_rewritten_trail_and_says_so(
        signed, people, api_as, client, django_capture_on_commit_callbacks):
    from reconciliation.models import AlertEvent

    # Rewrite from entry 2, remake the tree, delete the checkpoints that would object.
    rewrite_from(2)
    rebuild_tree()
    sql("DELETE FROM audit_auditcheckpoint")
    # The database alone now tells a consistent story; only the signer's memory objects.
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 8, "witness-missing")
    assert "which the signer remembers signing, is missing from the database" in report.problem

    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(people.dana).get("/api/v1/audit/export?format=jsonl")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
    assert "not consistent with the head of 8 entries the signer's memory holds" in (
        response.json()["error"]["message"])
    assert not AuditCheckpoint.objects.exists()  # the real key signed nothing
    refused = AuditEntry.objects.get(action=AuditAction.SIGNING_REFUSED)
    assert "the log was rewritten below entry 9" in refused.reason
    assert AlertEvent.objects.filter(event="audit.signing_refused", severity="high").exists()
    for kept in (signer.memory_file(), signer.refusal_file()):  # beside the key: owner-only
        assert kept.stat().st_mode & 0o077 == 0, kept
    ready = client.get("/readyz").json()
    assert ready["status"] == "degraded"
    assert ready["checks"]["audit_signing"].startswith("refused: refused to sign the head")

    # Appends go on (a refusal must not stop the product), unsigned, one entry per refusal.
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(EVERY * 2):
            audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"more:{i}")
    assert not AuditCheckpoint.objects.exists()
    assert AuditEntry.objects.filter(action=AuditAction.SIGNING_REFUSED).count() == 1
    with pytest.raises(CommandError, match="signing refused: refused to sign the head"):
        call_command("audit", "checkpoint", stdout=io.StringIO())
    report = verify_api(people, api_as)
    assert (report["ok"], report["first_broken_seq"], report["reason"]) == (
        False, 8, "witness-missing")


def test_a_cut_back_trail_is_refused_by_the_witness_even_without_the_signers_memory(
        signed, settings, tmp_path, django_capture_on_commit_callbacks):
    from tests.audit.test_tamper import cut_tail

    folder = tmp_path / "witness"
    settings.AUDIT_WITNESSES = [f"file://{folder}"]
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(2):  # entry 12: a checkpoint, published to the witness
            audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"w:{i}")
    assert (folder / "checkpoint-000000000012.json").exists()
    cut_tail(6)
    sql("DELETE FROM audit_auditcheckpoint WHERE seq > 6")
    signer.memory_file().unlink()  # the attacker reached the key's directory too
    with pytest.raises(signer.SigningRefused, match="witness .* holds a signed head of 12"):
        with django_capture_on_commit_callbacks(execute=True):
            audit.actions.checkpoint_head()
    assert AuditChainHead.objects.get().seq == 6


def test_the_development_installation_has_a_witness_and_a_signer_memory_by_default(tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {k: v for k, v in os.environ.items() if not k.startswith("AUDIT_")}
    env.update(VAR_DIR=str(tmp_path / "var"), DEBUG="1", DJANGO_SETTINGS_MODULE="config.settings")
    shown = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings as s; print(s.AUDIT_WITNESSES);"
         "print(s.AUDIT_SIGNED_HEAD_FILE)"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=True)
    witnesses_line, memory_line = shown.stdout.splitlines()
    assert witnesses_line == f"['file://{tmp_path / 'var' / 'audit-witness'}']"
    assert memory_line == str(tmp_path / "var" / "signed-head.json")
    env["AUDIT_WITNESSES"] = "none"
    shown = subprocess.run([sys.executable, "-c", "from django.conf import settings as s;"
                            "print(s.AUDIT_WITNESSES)"],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert shown.stdout.strip() == "[]", shown.stderr
