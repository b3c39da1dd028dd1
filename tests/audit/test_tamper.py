"""Tampering through raw SQL (as a database superuser would) is caught at the exact seq."""

import io
import json
from datetime import timedelta

import pytest
from agentgov import checkpoints as signed_heads
from agentgov import merkle
from agentgov.entries import entry_leaf_hash
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

import audit
from audit.chain import GENESIS_HASH, entry_hash, format_time
from audit.choices import AuditAction
from audit.models import AuditCheckpoint
from audit.verify import fetch_chunk, verify_trail
from tests.audit.attacker import unbind_columns

pytestmark = pytest.mark.django_db


@pytest.fixture
def trail():
    """Ten entries, with the PostgreSQL append-only trigger switched off as an attacker would."""
    for i in range(10):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}",
                     after={"roles": ["owner"], "i": i})
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
            cursor.execute("ALTER TABLE audit_auditcheckpoint DISABLE TRIGGER USER")
    assert verify_trail().ok


def sql(statement: str, params: list | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params or [])


def insert_row(row: dict) -> None:
    columns = ", ".join(row)
    marks = ", ".join(["%s"] * len(row))
    values = [json.dumps(v) if k in ("before", "after") else v for k, v in row.items()]
    sql(f"INSERT INTO audit_auditentry ({columns}) VALUES ({marks})", values)


def test_an_altered_row_is_reported_at_its_seq(trail):
    unbind_columns()  # else the database refuses a column that differs from its payload
    sql("UPDATE audit_auditentry SET actor = 'mallory' WHERE seq = 4")
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 4)
    assert "does not match its hash" in report.problem


def test_a_deleted_row_is_reported_as_missing(trail):
    sql("DELETE FROM audit_auditentry WHERE seq = 6")
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 6)
    assert "missing" in report.problem


def test_deleting_the_newest_rows_is_caught_by_the_head(trail):
    sql("DELETE FROM audit_auditentry WHERE seq >= 9")
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 9)


def test_an_inserted_row_with_a_valid_looking_hash_breaks_the_next_link(trail):
    # Make room after seq 5 and slip in a forged entry that links correctly to 5.
    unbind_columns()
    sql("UPDATE audit_auditentry SET seq = seq + 100 WHERE seq > 5")
    sql("UPDATE audit_auditentry SET seq = seq - 99 WHERE seq > 100")
    five = fetch_chunk(4, 1)[0]
    forged = {**five, "seq": 6, "actor": "mallory", "target": "user:mallory",
              "prev_hash": five["hash"]}
    forged["hash"] = entry_hash(forged)
    forged["at"] = five["at"].replace("Z", "+00:00")
    insert_row(forged)
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 7)
    assert "does not link" in report.problem


def test_two_swapped_rows_are_reported_at_the_first(trail):
    unbind_columns()
    sql("UPDATE audit_auditentry SET seq = 1000 WHERE seq = 3")
    sql("UPDATE audit_auditentry SET seq = 3 WHERE seq = 4")
    sql("UPDATE audit_auditentry SET seq = 4 WHERE seq = 1000")
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 3)


@override_settings(AUDIT_CHECKPOINT_EVERY=4)
def test_a_wholly_rehashed_chain_is_caught_by_the_signed_checkpoint(db):
    for i in range(10):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}")
    if connection.vendor == "postgresql":
        sql("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
    # Rewrite entry 2 and re-hash everything after it, so every link and hash is consistent.
    rows = fetch_chunk(0, 100)
    rows[1]["actor"] = "mallory"
    previous = rows[0]["hash"]
    for row in rows[1:]:
        row["prev_hash"] = previous
        row["hash"] = entry_hash(row)
        previous = row["hash"]
    sql("DELETE FROM audit_auditentry WHERE seq >= 2")
    for row in rows[1:]:
        insert_row({**row, "at": row["at"].replace("Z", "+00:00")})
    sql("UPDATE audit_auditchainhead SET hash = %s", [previous])
    report = verify_trail()
    # Reported from the first entry no valid checkpoint proves: here, the start.
    assert (report.ok, report.first_broken_seq) == (False, 1)
    assert "signed checkpoint at 4" in report.problem


@override_settings(AUDIT_CHECKPOINT_EVERY=4)
def test_a_checkpoint_re_signed_without_the_key_is_refused(db):
    for i in range(5):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}")
    if connection.vendor == "postgresql":
        sql("ALTER TABLE audit_auditcheckpoint DISABLE TRIGGER USER")
    sql("UPDATE audit_auditcheckpoint SET signature = %s WHERE seq = 4", ["0" * 64])
    report = verify_trail()
    assert (report.ok, report.first_broken_seq) == (False, 1)
    assert "invalid signature" in report.problem


# Signed tree heads, truncation, witnesses and keys (issue 13). The same tests run on SQLite.

WITNESS_EVERY = 4


@pytest.fixture
def witnessed(settings, tmp_path, django_capture_on_commit_callbacks):
    """Ten entries with checkpoints at 4 and 8, each also written to a witness directory."""
    settings.AUDIT_CHECKPOINT_EVERY = WITNESS_EVERY
    folder = tmp_path / "witness"
    settings.AUDIT_WITNESSES = [f"file://{folder}"]
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(10):
            audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}")
    if connection.vendor == "postgresql":
        for table in ("auditentry", "auditcheckpoint", "audittreenode"):
            sql(f"ALTER TABLE audit_{table} DISABLE TRIGGER USER")
    assert sorted(p.name for p in folder.iterdir()) == [
        "checkpoint-000000000004.json", "checkpoint-000000000008.json"]
    assert verify_trail().ok
    return folder


def cut_tail(keep: int) -> None:
    """Delete every entry after `keep` and move the head back to it, as an attacker would."""
    last = fetch_chunk(keep - 1, 1)[0]
    sql("DELETE FROM audit_auditentry WHERE seq > %s", [keep])
    sql("UPDATE audit_auditchainhead SET seq = %s, hash = %s", [keep, last["hash"]])
    with connection.cursor() as cursor:  # and the tree nodes past it, so appends go on
        cursor.execute("SELECT position FROM audit_audittreenode")
        beyond = [p for (p,) in cursor.fetchall()
                  if ((p & (1 << 40) - 1) + 1) << (p >> 40) > keep]
    for position in beyond:
        sql("DELETE FROM audit_audittreenode WHERE position = %s", [position])


def rewrite_from(seq: int) -> list[dict]:
    """Change entry `seq` and re-hash everything after it, links and hashes all consistent."""
    rows = fetch_chunk(0, 1000)
    rows[seq - 1]["actor"] = "mallory"
    previous = rows[seq - 2]["hash"] if seq > 1 else GENESIS_HASH
    for row in rows[seq - 1:]:
        row["prev_hash"] = previous
        row["hash"] = entry_hash(row)
        previous = row["hash"]
    sql("DELETE FROM audit_auditentry WHERE seq >= %s", [seq])
    for row in rows[seq - 1:]:
        insert_row({**row, "at": row["at"].replace("Z", "+00:00")})
    sql("UPDATE audit_auditchainhead SET hash = %s", [previous])
    return rows


def re_sign(rows: list[dict], private) -> None:
    """Replace every checkpoint's root with the rewritten log's, signed with `private`."""
    leaves = [entry_leaf_hash(row) for row in rows]
    with connection.cursor() as cursor:
        cursor.execute("SELECT seq FROM audit_auditcheckpoint")
        sizes = [size for (size,) in cursor.fetchall()]
    for size in sizes:
        checkpoint = AuditCheckpoint.objects.get(seq=size)
        signed = signed_heads.sign_checkpoint(private, size, merkle.root(leaves[:size]).hex(),
                                              format_time(checkpoint.at))
        sql("UPDATE audit_auditcheckpoint SET root = %s, key_id = %s, signature = %s, "
            "head_hash = %s WHERE seq = %s",
            [signed["root"], signed["key_id"], signed["signature"], rows[size - 1]["hash"],
             size])


def test_a_cut_tail_with_its_head_moved_back_is_caught_by_the_checkpoint_beyond(
        people, api_as, settings):
    dana = api_as(people.dana)
    settings.AUDIT_CHECKPOINT_EVERY = 8
    while AuditCheckpoint.objects.count() < 2:
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target="user:u")
    if connection.vendor == "postgresql":
        for table in ("auditentry", "audittreenode"):
            sql(f"ALTER TABLE audit_{table} DISABLE TRIGGER USER")
    cut_tail(14)
    report = dana.get("/api/v1/audit/verify").json()
    assert (report["ok"], report["first_broken_seq"], report["reason"]) == (False, 15,
                                                                           "truncated")
    assert "covers 16 entries but the log ends at entry 14" in report["problem"]


def test_a_cut_tail_with_the_later_checkpoints_deleted_is_caught_by_the_witness(witnessed,
                                                                              settings):
    cut_tail(6)
    sql("DELETE FROM audit_auditcheckpoint WHERE seq > 6")
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 7, "truncated")
    assert f"witness file://{witnessed}" in report.problem
    with pytest.raises(CommandError, match="broken at seq 7"):
        call_command("audit", "verify", stdout=io.StringIO())
    # Without a witness the signer's memory of its last signed head still remembers the cut.
    settings.AUDIT_WITNESSES = []
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 7, "truncated")
    assert "the signer remembers signing a head of 8 entries" in report.problem
    # Without either, nothing outside the database remembers the cut: the named limit.
    from audit import signer

    signer.memory_file().unlink()
    assert verify_trail().ok


def test_a_checkpoint_deleted_from_the_database_is_named_by_the_witness(witnessed):
    sql("DELETE FROM audit_auditcheckpoint WHERE seq = 4")
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 4, "witness-missing")
    assert "missing from the database" in report.problem


def test_a_checkpoint_that_never_reached_the_witness_is_reported(witnessed, monkeypatch):
    (witnessed / "checkpoint-000000000008.json").unlink()
    assert verify_trail().ok  # just published copies may still be on their way
    monkeypatch.setattr("audit.verify.PUBLISH_GRACE", timedelta(0))
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 8, "witness-missing")
    assert "never reached witness" in report.problem


def test_publish_hands_a_witness_the_checkpoints_it_never_received(witnessed, monkeypatch):
    """As after an upgrade from a release without witnesses: verify names the checkpoint the
    witness lacks, `audit publish` hands it over, and verify passes."""
    held = (witnessed / "checkpoint-000000000004.json").read_bytes()
    (witnessed / "checkpoint-000000000008.json").unlink()
    monkeypatch.setattr("audit.verify.PUBLISH_GRACE", timedelta(0))
    assert verify_trail().reason == "witness-missing"
    out = io.StringIO()
    call_command("audit", "publish", stdout=out)
    assert json.loads(out.getvalue())["ok"] is True
    assert (witnessed / "checkpoint-000000000008.json").exists()
    assert (witnessed / "checkpoint-000000000004.json").read_bytes() == held  # never rewritten
    assert verify_trail().ok


def test_publish_refuses_a_trail_broken_otherwise_and_publishes_nothing(witnessed,
                                                                         monkeypatch):
    """A witness handed a broken trail's checkpoints would vouch for the break."""
    (witnessed / "checkpoint-000000000008.json").unlink()
    monkeypatch.setattr("audit.verify.PUBLISH_GRACE", timedelta(0))
    unbind_columns()
    sql("UPDATE audit_auditentry SET actor = 'mallory' WHERE seq = 6")
    with pytest.raises(CommandError, match="nothing published"):
        call_command("audit", "publish", stdout=io.StringIO())
    assert not (witnessed / "checkpoint-000000000008.json").exists()


def test_a_log_rewritten_and_re_signed_with_the_stolen_key_differs_from_the_witness(
        witnessed, key_file):
    rows = rewrite_from(2)
    re_sign(rows, signed_heads.load_private_key(key_file.read_bytes()))
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 4, "witness-mismatch")


def test_a_log_re_signed_with_a_key_of_the_attackers_own_is_an_unknown_key(witnessed):
    rows = rewrite_from(2)
    mallory = Ed25519PrivateKey.generate()
    published = signed_heads.published_key(mallory.public_key(), "2026-01-01T00:00:00.000000Z")
    sql("INSERT INTO audit_auditkey (key_id, algorithm, public_key, created_at) "
        "VALUES (%s, %s, %s, %s)",
        [published["key_id"], "ed25519", published["public_key"], "2026-01-01T00:00:00+00:00"])
    re_sign(rows, mallory)
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 1, "unknown-key")
    assert published["key_id"] in report.problem


def test_a_checkpoint_root_changed_without_the_key_fails_its_signature(witnessed):
    sql("UPDATE audit_auditcheckpoint SET root = %s WHERE seq = 8", ["ab" * 32])
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 5, "rehashed")
    assert "checkpoint at entry 8 has an invalid signature" in report.problem


def test_a_rewritten_log_under_its_old_signed_roots_is_rehashed(witnessed):
    rewrite_from(6)
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 5, "rehashed")
    assert "differ from the signed checkpoint at 8" in report.problem


# Issue 28's siblings on the server: checkpoints removed under a rewrite, another trail's witness.


def test_a_rewrite_with_the_objecting_checkpoints_deleted_is_named_by_the_witness(witnessed):
    from audit import signer
    from tests.audit.test_trust_anchors import rebuild_tree

    rewrite_from(2)
    rebuild_tree()
    sql("DELETE FROM audit_auditcheckpoint")
    signer.memory_file().unlink()  # the attacker reached the key's directory too
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 4, "witness-mismatch")
    assert report.problem == (
        f"the checkpoint at entry 4, held by witness file://{witnessed}, is missing from the "
        "database, and entries up to 4 do not hash to the root the witness holds: the log was "
        "rewritten and the checkpoint deleted")


def replace_copy(folder, size: int, checkpoint: dict) -> None:
    """What a witness of another trail holds at `size` (copies are read-only: replaced)."""
    path = folder / f"checkpoint-{size:012d}.json"
    path.unlink(missing_ok=True)
    path.write_text(json.dumps(checkpoint))


def test_a_witness_of_another_trail_is_refused_by_verify_and_evidence(
        witnessed, people, api_as, refund_agent, key_file, django_capture_on_commit_callbacks):
    at = "2026-01-01T00:00:00.000000Z"
    stranger = signed_heads.sign_checkpoint(Ed25519PrivateKey.generate(), 6, "ab" * 32, at)
    replace_copy(witnessed, 6, stranger)
    report = api_as(people.dana).get("/api/v1/audit/verify").json()
    assert (report["ok"], report["first_broken_seq"], report["reason"]) == (
        False, 6, "witness-mismatch")
    assert (f"the checkpoint at entry 6, held by witness file://{witnessed}, is missing from "
            f"the database, and the witness's copy does not hold (checkpoint signed by key "
            f"'{stranger['key_id']}', which is not a trusted key): another trail's witness, "
            "or a forged copy") == report["problem"]

    # Another installation's trail signed with this very key: a root these entries do not make.
    real = signed_heads.load_private_key(key_file.read_bytes())
    replace_copy(witnessed, 6, signed_heads.sign_checkpoint(real, 6, "ab" * 32, at))
    report = api_as(people.dana).get("/api/v1/audit/verify").json()
    assert (report["ok"], report["first_broken_seq"], report["reason"]) == (
        False, 6, "witness-mismatch")
    assert "entries up to 6 do not hash to the root the witness holds" in report["problem"]

    # Evidence is never served over a head a witness checkpoint contradicts.
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(people.dana).get("/api/v1/agents/refund-agent/evidence")
    assert response.status_code == 409, response.content
    message = response.json()["error"]["message"]
    assert message.startswith(f"witness file://{witnessed}: witness-mismatch: the bundle's "
                              "checkpoint "), message
    assert "does not extend the witness's checkpoint 6 (key " in message
