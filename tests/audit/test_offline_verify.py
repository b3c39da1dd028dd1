"""An outside auditor verifies what compliance downloads, offline: `agentctl audit verify` run
from a virtual environment holding only the client package (no Django, no server), on the
export and on an evidence bundle, untouched and tampered in each way an insider could try."""

import base64
import csv
import io
import json
import subprocess
from pathlib import Path

import pytest
from agentgov import checkpoints as signing
from agentgov.entries import GENESIS_HASH, entry_hash, entry_leaf_hash
from agentgov.merkle import TreeBuilder
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db import connection

import audit
from audit import keys
from audit.choices import AuditAction
from tests.audit.attacker import DROP_BINDING
from tests.conftest import refund_manifest

pytestmark = pytest.mark.django_db


@pytest.fixture
def verify(auditor_agentctl):
    """Run `agentctl audit verify FILE ...` as the auditor; returns (status, stdout, stderr)."""

    def run(path: Path, *args: str) -> tuple[int, str, str]:
        done = subprocess.run([str(auditor_agentctl), "audit", "verify", str(path), *args],
                              capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr

    return run


@pytest.fixture
def witness(settings, tmp_path) -> Path:
    """A directory witness, configured before the trail is written (list it before `trail`)."""
    folder = tmp_path / "witness"
    settings.AUDIT_WITNESSES = [f"file://{folder}"]
    return folder


@pytest.fixture
def exported(people, api_as, django_capture_on_commit_callbacks, tmp_path):
    """Compliance downloads the export through the API, witnesses published."""
    return lambda: export(api_as, people, django_capture_on_commit_callbacks, tmp_path)


@pytest.fixture
def trail(people, refund_agent, settings, django_capture_on_commit_callbacks):
    """A trail with a checkpoint every 5 entries, some about the refund agent."""
    settings.AUDIT_CHECKPOINT_EVERY = 5
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(12):
            audit.record(actor=people.alice, action=AuditAction.TOKEN_ISSUED,
                         target=f"token:{n}", agent="refund-agent" if n % 2 else "")


@pytest.fixture
def public_key(trail, people, api_as) -> str:
    """The key the auditor fetched once from GET /api/v1/audit/keys and trusts from then on."""
    published = api_as(people.dana).get("/api/v1/audit/keys").json()["keys"]
    (current,) = [key for key in published if key["retired_at"] is None]
    return current["public_key"]


def export(api_as, people, capture, tmp_path) -> tuple[Path, list[dict]]:
    with capture(execute=True):
        response = api_as(people.dana).get("/api/v1/audit/export?format=jsonl")
    assert response.status_code == 200
    body = b"".join(response).decode("utf-8")
    path = tmp_path / "trail.jsonl"
    path.write_text(body, encoding="utf-8")
    return path, [json.loads(line) for line in body.splitlines()]


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def rehash(records: list[dict], signer: Ed25519PrivateKey, key_id: str | None = None,
           later: tuple[int, Ed25519PrivateKey] | None = None) -> None:
    """What an insider holding the database does: rewrite the chain, the tree and every
    checkpoint so the file is consistent again, signed with `signer` (and, past size `later[0]`,
    with `later[1]`)."""
    prev, tree = GENESIS_HASH, TreeBuilder()
    roots = {0: tree.root().hex()}
    for record in records:
        if record["type"] == "entry":
            entry = record["entry"]
            entry["prev_hash"] = prev
            entry["hash"] = prev = entry_hash(entry)
            tree.append(entry_leaf_hash(entry))
            roots[tree.size] = tree.root().hex()
    for record in records:
        if record["type"] == "checkpoint":
            key = later[1] if later and record["size"] > later[0] else signer
            signed = signing.sign_checkpoint(key, record["size"], roots[record["size"]],
                                             record["at"])
            if key_id:
                signed["key_id"] = key_id
            record.update(signed)


def test_an_untouched_export_is_proven_by_its_signed_checkpoints(
        public_key, trail, people, api_as, exported, tmp_path, verify):
    path, records = exported()
    entries = [r for r in records if r["type"] == "entry"]
    sizes = [r["size"] for r in records if r["type"] == "checkpoint"]
    assert records[0]["size"] == len(entries) == sizes[-1]
    assert entries[-1]["entry"]["action"] == "audit.exported"  # the export proves itself
    status, out, err = verify(path, "--public-key", public_key)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == f"OK {len(entries)} entries, head {entries[-1]['entry']['hash']}"
    assert [line.split(" proven by ")[0] for line in lines[1:]] == [
        f"entries 1-{size}" for size in sizes]

    pem = tmp_path / "key.pem"  # the same key as a PEM file
    pem.write_text(signing.public_key_pem(keys.signing_key().public_key()))
    assert verify(path, "--public-key", str(pem))[0] == 0

    status, _, err = verify(path)  # nothing trusted, nothing proven
    assert status == 2 and "--public-key" in err  # a usage mistake


@pytest.mark.parametrize("tamper, seq, reason", [
    ("edit", 3, "edited"),
    ("delete", 4, "deleted"),
    ("truncate", None, "truncated"),
    ("rehash-other-key", 1, "unknown-key"),
    ("rehash-claiming-trusted-key", 1, "rehashed"),
    ("append-unsigned", None, "unsigned"),
])
def test_each_tampered_export_fails_at_the_first_bad_seq_with_its_reason(
        public_key, trail, people, api_as, exported, tmp_path, verify,
        tamper, seq, reason):
    path, records = exported()
    entries = [r for r in records if r["type"] == "entry"]
    count = len(entries)
    if tamper == "edit":
        entries[2]["entry"]["actor"] = "mallory"
    elif tamper == "delete":
        records.remove(entries[3])
    elif tamper == "truncate":  # drop the tail, keep the header and checkpoints
        records = records[:-2]
        seq = count - 1
    elif tamper == "rehash-other-key":
        entries[0]["entry"]["reason"] = "nothing to see"
        rehash(records, Ed25519PrivateKey.generate())
    elif tamper == "rehash-claiming-trusted-key":
        entries[0]["entry"]["reason"] = "nothing to see"
        rehash(records, Ed25519PrivateKey.generate(), key_id=entries and records[1]["key_id"])
    elif tamper == "append-unsigned":
        extra = json.loads(json.dumps(entries[-1]))
        extra["entry"].update(seq=count + 1, prev_hash=entries[-1]["entry"]["hash"])
        extra["entry"]["hash"] = entry_hash(extra["entry"])
        records.append(extra)
        seq = count + 1
    status, out, err = verify(write(path, records), "--public-key", public_key)
    assert status == 1 and out == ""
    assert err.startswith(f"FAILED at seq {seq}: {reason}: "), err


def test_a_truncated_export_with_its_later_checkpoints_removed_is_caught_by_the_witness(
        witness, public_key, trail, people, api_as, exported, tmp_path, verify):
    path, records = exported()
    assert verify(path, "--public-key", public_key, "--witness", str(witness))[0] == 0
    # Cut the file back to its first checkpoint and remove every later one: alone, it holds.
    first = next(r["size"] for r in records if r["type"] == "checkpoint")
    cut = [r for r in records if r["type"] == "key"
           or (r["type"] == "checkpoint" and r["size"] <= first)
           or (r["type"] == "entry" and r["entry"]["seq"] <= first)]
    cut.insert(0, {**records[0], "size": first})
    write(path, cut)
    assert verify(path, "--public-key", public_key)[0] == 0
    status, _, err = verify(path, "--public-key", public_key, "--witness", str(witness))
    assert status == 1 and err.startswith(f"FAILED at seq {first + 1}: truncated: "), err


def test_a_log_forked_with_the_real_key_disagrees_with_the_witness(
        witness, public_key, trail, people, api_as, exported, tmp_path, verify):
    path, records = exported()
    next(r for r in records if r["type"] == "entry")["entry"]["actor"] = "mallory"
    rehash(records, keys.signing_key())  # the operator holds the key: only the witness objects
    write(path, records)
    assert verify(path, "--public-key", public_key)[0] == 0
    first = next(r["size"] for r in records if r["type"] == "checkpoint")
    status, _, err = verify(path, "--public-key", public_key, "--witness", str(witness))
    assert status == 1 and err.startswith(f"FAILED at seq {first}: witness-mismatch: "), err


def test_a_checkpoint_the_witness_never_received_is_reported(
        witness, public_key, trail, people, api_as, exported, tmp_path, verify):
    path, records = exported()
    last = records[0]["size"]
    (witness / f"checkpoint-{last:012d}.json").unlink()
    status, _, err = verify(path, "--public-key", public_key, "--witness", str(witness))
    assert status == 1 and err.startswith(f"FAILED at seq {last}: witness-missing: "), err


# --- evidence bundles -------------------------------------------------------------------------


def evidence(client, tmp_path, query="") -> tuple[Path, dict]:
    response = client.get(f"/api/v1/agents/refund-agent/evidence{query}")
    assert response.status_code == 200, response.content
    path = tmp_path / "evidence.json"
    path.write_bytes(response.content)
    return path, response.json()


def test_an_evidence_bundle_is_verified_offline_without_the_rest_of_the_trail(
        public_key, trail, people, api_as, tmp_path, verify):
    path, document = evidence(api_as(people.alice), tmp_path)  # alice owns the agent
    seqs = [item["entry"]["seq"] for item in document["entries"]]
    assert len(seqs) >= 6 and all(item["entry"]["agent"] == "refund-agent"
                                  for item in document["entries"])
    last = document["entries"][-1]["entry"]  # the bundle proves that it was fetched, and by whom
    assert (last["action"], last["actor"], last["seq"]) == (
        "audit.exported", "alice", document["checkpoint"]["size"])
    status, out, err = verify(path, "--public-key", public_key)
    assert status == 0, err
    assert out.splitlines()[0].startswith(f"OK {len(seqs)} entries")
    assert f"(seq {seqs[0]}-{seqs[-1]}) proven by checkpoint {document['checkpoint']['size']}" \
        in out

    middle = document["entries"][len(seqs) // 2]
    since = middle["entry"]["at"]
    path, later = evidence(api_as(people.dana), tmp_path,
                           f"?from={since}&to=2999-01-01T00:00:00Z")
    assert later["from"] == since
    assert middle["entry"] in [item["entry"] for item in later["entries"]]
    assert all(item["entry"]["at"] >= since for item in later["entries"])
    assert verify(path, "--public-key", public_key)[0] == 0


@pytest.mark.parametrize("tamper, reason", [
    ("edit", "edited"), ("proof", "edited"), ("other-key", "unknown-key"),
    ("checkpoint", "rehashed"),
])
def test_a_tampered_evidence_bundle_fails_with_its_reason(
        public_key, trail, people, api_as, tmp_path, verify, tamper, reason):
    path, document = evidence(api_as(people.dana), tmp_path)
    item = document["entries"][1]
    seq = item["entry"]["seq"]
    if tamper == "edit":
        item["entry"]["reason"] = "approved by the board"
        item["entry"]["hash"] = entry_hash(item["entry"])  # the chain hash alone is easy
    elif tamper == "proof":
        item["proof"][0] = "00" * 32
    elif tamper == "other-key":
        signer = Ed25519PrivateKey.generate()
        document["checkpoint"] = signing.sign_checkpoint(
            signer, document["checkpoint"]["size"], document["checkpoint"]["root"],
            document["checkpoint"]["at"])
        seq = 1
    elif tamper == "checkpoint":
        document["checkpoint"]["size"] += 1
        seq = 1
    path.write_text(json.dumps(document), encoding="utf-8")
    status, _, err = verify(path, "--public-key", public_key)
    assert status == 1 and err.startswith(f"FAILED at seq {seq}: {reason}: "), err


def test_evidence_is_for_the_owner_compliance_and_admin_only(trail, people, api_as):
    from rest_framework.test import APIClient

    for who, status in (("alice", 200), ("dana", 200), ("admin", 200), ("bob", 403)):
        response = api_as(getattr(people, who)).get("/api/v1/agents/refund-agent/evidence")
        assert response.status_code == status, who
    assert APIClient().get("/api/v1/agents/refund-agent/evidence").status_code == 401
    missing = api_as(people.dana).get("/api/v1/agents/nobody/evidence")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    bad = api_as(people.dana).get("/api/v1/agents/refund-agent/evidence?from=yesterday")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["pointer"] == "/from"
    backwards = api_as(people.dana).get(
        "/api/v1/agents/refund-agent/evidence?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z")
    assert backwards.status_code == 400


def test_the_agent_page_offers_the_evidence_download_to_those_who_may_fetch_it(
        trail, people, client):
    client.force_login(people.alice)
    page = client.get("/agents/refund-agent/").content.decode()
    assert 'action="/api/v1/agents/refund-agent/evidence"' in page
    client.force_login(people.bob)
    assert "/evidence" not in client.get("/agents/refund-agent/").content.decode()
    client.force_login(people.alice)
    download = client.get("/api/v1/agents/refund-agent/evidence?from=&to=")
    assert download.status_code == 200 and download.json()["format"] == "agentgov-evidence/v1"


def test_the_public_key_given_as_base64_must_be_a_key(trail, exported, verify):
    path, _ = exported()
    status, _, err = verify(path, "--public-key", base64.b64encode(b"short").decode())
    assert status == 2 and err.startswith("error: ")  # a usage mistake


# --- CSV for spreadsheets ---------------------------------------------------------------------

FORMULAS = ['=HYPERLINK("http://x","y")', "@SUM(1)", "-1+1", "+1", "\tcmd", "\rcmd", "'quoted"]


def test_csv_cells_never_start_a_formula_yet_the_csv_still_verifies_offline(
        people, refund_agent, api_as, tmp_path, verify):
    from registry import actions
    from registry.choices import VersionSource

    (outcome,) = actions.apply_manifests(
        [refund_manifest(enforcement={"default": "correct"})], actor=people.alice,
        source=VersionSource.YAML)
    approved = api_as(people.bob).post(f"/api/v1/proposals/{outcome.version.pk}/approve",
                                       {"comment": FORMULAS[0]}, format="json")
    assert approved.status_code == 200
    for comment in FORMULAS[1:]:
        audit.record(actor=people.alice, action=AuditAction.TOKEN_ISSUED, target=comment,
                     reason=comment, after={"n": -1})
    dana = api_as(people.dana)
    response = dana.get("/api/v1/audit/export?format=csv")
    body = b"".join(response).decode("utf-8")
    rows = list(csv.reader(io.StringIO(body)))[1:]
    cells = [cell for row in rows for cell in row]
    assert not [cell for cell in cells if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
    reasons = {row[8] for row in rows}
    assert {"'" + text for text in FORMULAS} <= reasons

    path = tmp_path / "trail.csv"
    path.write_text(body, encoding="utf-8", newline="")
    status, out, err = verify(path, "--chain-only")  # no witness here: the chain alone
    assert status == 3, err
    assert out == (f"CHAIN ONLY {len(rows)} entries, head {rows[-1][-1]}: chain only, nothing "
                   "proven by a signature\n")
    # The README's rule (drop one leading quote) gives back exactly the hashed values.
    restored = [[cell[1:] if cell.startswith("'") else cell for cell in row] for row in rows]
    assert {text for text in FORMULAS} <= {row[8] for row in restored}

    from django.core.management import call_command  # the operator's export: the same cells

    by_command = tmp_path / "by-command.csv"
    call_command("audit", "export", "--format", "csv", "--output", str(by_command))
    with open(by_command, encoding="utf-8", newline="") as rows_file:
        command_cells = [cell for row in csv.reader(rows_file) for cell in row]
    assert not [cell for cell in command_cells if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert verify(by_command, "--chain-only")[0] == 3

    edited = body.replace("'@SUM(1)", "'@SUM(2)", 1)
    path.write_text(edited, encoding="utf-8", newline="")
    status, _, err = verify(path, "--chain-only")
    assert status == 1 and err.startswith("BROKEN at seq ")


def test_after_a_rotation_the_first_key_alone_proves_the_whole_export(
        public_key, trail, people, settings, exported, verify):
    from cryptography.hazmat.primitives import serialization

    from audit.actions import rotate_key

    new_key = Ed25519PrivateKey.generate()
    rotate_key(actor=people.dana, new_key=new_key)
    settings.AUDIT_PRIVATE_KEY = keys.private_key_pem(new_key).decode()
    for n in range(6):
        audit.record(actor=people.alice, action=AuditAction.TOKEN_ISSUED, target=f"later:{n}")
    path, records = exported()
    new_id = signing.key_id(new_key.public_key())
    assert {r["key_id"] for r in records if r["type"] == "checkpoint"} >= {new_id}

    status, out, err = verify(path, "--public-key", public_key)
    assert status == 0, err
    assert f"key {new_id} trusted from the rotation at seq " in out
    assert out.splitlines()[-1].startswith(f"entries 1-{records[0]['size']} proven by "
                                           f"checkpoint {records[0]['size']} (key {new_id}")
    raw = new_key.public_key().public_bytes(serialization.Encoding.Raw,
                                            serialization.PublicFormat.Raw)
    status, _, err = verify(path, "--public-key", base64.b64encode(raw).decode())
    assert status == 1 and err.startswith("FAILED at seq 1: unknown-key: ")

    # A rotation entry whose endorsement is forged vouches for nothing, even in a file whose
    # checkpoints are all re-signed with the real keys.
    rotation = next(r["entry"] for r in records
                    if r["type"] == "entry" and r["entry"]["action"] == "audit.key_rotated")
    rotation["after"]["signature_by_previous"] = base64.b64encode(b"\0" * 64).decode()
    old_key = checkpoints_key_file(settings)
    rehash(records, old_key, later=(rotation["seq"], new_key))
    status, _, err = verify(write(path, records), "--public-key", public_key)
    assert status == 1 and err.startswith(f"FAILED at seq {rotation['seq'] + 1}: unknown-key: ")


def checkpoints_key_file(settings) -> Ed25519PrivateKey:
    """The key the trail was first signed with (the development key file)."""
    return signing.load_private_key(Path(settings.AUDIT_PRIVATE_KEY_FILE).read_bytes())


def test_with_the_workers_sequencer_the_export_places_its_queue_and_ends_at_its_own_entry(
        public_key, trail, people, settings, exported, verify):
    settings.AUDIT_SEQUENCER = "workers"
    for n in range(3):  # queued, not yet placed by any worker
        audit.record(actor=people.alice, action=AuditAction.TOKEN_ISSUED, target=f"queued:{n}")
    path, records = exported()
    entries = [r["entry"] for r in records if r["type"] == "entry"]
    queued = [e["target"] for e in entries if e["target"].startswith("queued:")]
    assert queued == ["queued:0", "queued:1", "queued:2"]
    assert entries[-1]["action"] == "audit.exported" and records[0]["pending"] == 0
    status, out, err = verify(path, "--public-key", public_key)
    assert status == 0 and out.startswith(f"OK {len(entries)} entries"), err


# --- tampering done in the database, before the export is made ------------------------------


@pytest.mark.parametrize("statement, seq, reason", [
    ("UPDATE audit_auditentry SET reason = 'approved by the board' WHERE seq = 3", 3, "edited"),
    ("DELETE FROM audit_auditentry WHERE seq = 4", 4, "deleted"),
    ("UPDATE audit_auditcheckpoint SET root = '" + "0" * 64 + "' WHERE seq = "
     "(SELECT MIN(seq) FROM audit_auditcheckpoint)", 1, "rehashed"),
])
def test_tampering_in_the_database_reaches_the_auditor_as_a_failed_export(
        public_key, trail, exported, verify, statement, seq, reason):
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":  # as a database superuser would
            cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
            cursor.execute(DROP_BINDING)
            cursor.execute("ALTER TABLE audit_auditcheckpoint DISABLE TRIGGER USER")
        cursor.execute(statement)
    path, _ = exported()
    status, out, err = verify(path, "--public-key", public_key)
    assert status == 1 and out == ""
    assert err.startswith(f"FAILED at seq {seq}: {reason}: "), err


def test_an_entry_edited_in_the_database_fails_its_evidence_bundle(public_key, trail, people,
                                                                   api_as, tmp_path, verify):
    from django.db import connection

    from audit.models import AuditEntry

    seq = AuditEntry.objects.filter(agent="refund-agent").order_by("-seq").values_list(
        "seq", flat=True)[2]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
            cursor.execute(DROP_BINDING)
        cursor.execute("UPDATE audit_auditentry SET actor = 'mallory' WHERE seq = %s", [seq])
    path, _ = evidence(api_as(people.dana), tmp_path)
    status, _, err = verify(path, "--public-key", public_key)
    assert status == 1 and err.startswith(f"FAILED at seq {seq}: edited: "), err


# --- issue 28: the verifier never says OK for less than it was asked ------------------------


def forged_entries(records: list[dict], seq: int) -> list[dict]:
    """The trail rewritten as an insider would hand it over without checkpoints: who did entry
    `seq` changed, every later hash recomputed so the chain holds."""
    entries = [json.loads(json.dumps(r["entry"])) for r in records if r["type"] == "entry"]
    entries[seq - 1]["actor"] = "mallory"
    prev = entries[seq - 2]["hash"] if seq > 1 else GENESIS_HASH
    for entry in entries[seq - 1:]:
        entry["prev_hash"] = prev
        entry["hash"] = prev = entry_hash(entry)
    return entries


def write_csv(path: Path, entries: list[dict]) -> Path:
    """Entries as the CSV export spells them (formula-escaped cells, JSON before/after)."""
    from agentgov.audit import escape_cell
    from agentgov.entries import ENTRY_FIELDS, canonical_json

    with open(path, "w", encoding="utf-8", newline="") as out:
        rows = csv.writer(out)
        rows.writerow(ENTRY_FIELDS)
        for entry in entries:
            rows.writerow([escape_cell(canonical_json(entry[name]) if name in ("before", "after")
                                       else str(entry[name])) for name in ENTRY_FIELDS])
    return path


def write_jsonl(path: Path, entries: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return path


def test_a_rewritten_trail_handed_over_without_checkpoints_is_never_ok_given_a_key(
        witness, public_key, trail, people, api_as, exported, tmp_path, verify,
        django_capture_on_commit_callbacks):
    path, records = exported()
    untouched = [r["entry"] for r in records if r["type"] == "entry"]
    count, head = len(untouched), untouched[-1]["hash"]
    # The honest CSV, held against the witness's signed checkpoints, is proven.
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(people.dana).get("/api/v1/audit/export?format=csv")
    body = b"".join(response).decode()
    honest = tmp_path / "honest.csv"
    honest.write_text(body, encoding="utf-8", newline="")
    first = next(r["size"] for r in records if r["type"] == "checkpoint")
    rows = list(csv.reader(io.StringIO(body)))[1:]
    status, out, err = verify(honest, "--public-key", public_key, "--witness", str(witness))
    assert status == 0, err
    assert out.splitlines()[0] == f"OK {len(rows)} entries, head {rows[-1][-1]}"
    assert out.splitlines()[1].startswith(f"entries 1-{first} proven by witnessed checkpoint "
                                          f"{first} ")

    forged = forged_entries(records, 3)
    for made in (write_csv(tmp_path / "forged.csv", forged),
                 write_jsonl(tmp_path / "forged.jsonl", forged)):
        status, out, err = verify(made, "--public-key", public_key, "--witness", str(witness))
        assert (status, out) == (1, ""), out
        assert err.startswith(f"FAILED at seq 1: witness-mismatch: entries up to {first} do not "
                              f"hash to the root checkpoint {first} (key "), err
        status, out, err = verify(made, "--public-key", public_key)  # no witness: no proof
        assert (status, out) == (1, "")
        assert err.startswith(f"FAILED at seq 1: unsigned: entries 1-{count} are not proven: "
                              "the file carries no signed checkpoint"), err
        status, out, err = verify(made)  # asked for nothing: told what it may ask for
        assert status == 2 and out == "" and "--chain-only" in err
        status, out, err = verify(made, "--chain-only")
        assert status == 3, err
        assert out.splitlines()[0] == (f"CHAIN ONLY {count} entries, head {forged[-1]['hash']}"
                                       ": chain only, nothing proven by a signature")
    assert forged[-1]["hash"] != head


def test_a_witness_of_another_trail_proves_nothing_about_this_one(
        public_key, trail, exported, tmp_path, verify):
    path, records = exported()
    entries = [r["entry"] for r in records if r["type"] == "entry"]
    csv_file = write_csv(tmp_path / "trail.csv", entries)
    # Another trail's witness, signed by another key: its checkpoints are not trusted.
    other, stranger = tmp_path / "other-witness", Ed25519PrivateKey.generate()
    other.mkdir()
    for record in records:
        if record["type"] == "checkpoint":
            copy = signing.sign_checkpoint(stranger, record["size"], "ab" * 32, record["at"])
            (other / f"checkpoint-{record['size']:012d}.json").write_text(json.dumps(copy))
    for given in (csv_file, path):
        status, out, err = verify(given, "--public-key", public_key, "--witness", str(other))
        assert (status, out) == (1, ""), out
        assert ": unknown-key: " in err.splitlines()[0] or ": witness-mismatch: " in err, err
    # Another trail's witness signed with this key (a second installation): roots differ.
    for copy_file in other.iterdir():
        copy = json.loads(copy_file.read_text())
        copy_file.write_text(json.dumps(signing.sign_checkpoint(
            keys.signing_key(), copy["size"], "ab" * 32, copy["at"])))
    first = next(r["size"] for r in records if r["type"] == "checkpoint")
    status, out, err = verify(csv_file, "--public-key", public_key, "--witness", str(other))
    assert (status, out) == (1, "")
    assert err.startswith(f"FAILED at seq 1: witness-mismatch: entries up to {first} do not "
                          f"hash"), err


def test_an_export_with_its_later_checkpoints_removed_is_unsigned_past_the_last_one(
        public_key, trail, exported, verify):
    path, records = exported()
    sizes = [r["size"] for r in records if r["type"] == "checkpoint"]
    kept = [r for r in records if r["type"] != "checkpoint" or r["size"] == sizes[0]]
    status, out, err = verify(write(path, kept), "--public-key", public_key)
    assert (status, out) == (1, "")
    assert err.startswith(f"FAILED at seq {sizes[0] + 1}: unsigned: entries {sizes[0] + 1}-"
                          f"{sizes[-1]} are not proven"), err


def test_a_checkpoint_past_a_rotation_re_signed_with_the_retired_key_is_refused(
        public_key, trail, people, settings, exported, verify, key_file):
    from audit.actions import rotate_key

    old, new_key = keys.signing_key(), Ed25519PrivateKey.generate()
    rotation = rotate_key(actor=people.dana, new_key=new_key)
    settings.AUDIT_PRIVATE_KEY = keys.private_key_pem(new_key).decode()
    for n in range(6):
        audit.record(actor=people.alice, action=AuditAction.TOKEN_ISSUED, target=f"later:{n}")
    path, records = exported()
    assert verify(path, "--public-key", public_key)[0] == 0
    later = next(r for r in records if r["type"] == "checkpoint" and r["size"] > rotation.seq)
    later.update(signing.sign_checkpoint(old, later["size"], later["root"], later["at"]))
    write(path, records)
    status, out, err = verify(path, "--public-key", public_key)  # the first key alone
    assert (status, out) == (1, "")
    assert err.startswith(f"FAILED at seq {rotation.seq + 1}: retired-key: checkpoint "
                          f"{later['size']} is signed by key "), err
    assert f"retired at tree size {rotation.seq}: it may sign nothing larger" in err
    # The operator's trusted key list (configuration) says the same on its own.
    status, _, err = verify(path, "--public-key", str(key_file.parent / "trusted-keys.json"))
    assert status == 1 and err.startswith(f"FAILED at seq {rotation.seq + 1}: retired-key: ")


def test_a_forged_rotation_in_the_file_vouching_for_the_attackers_key_is_not_trusted(
        public_key, trail, exported, verify):
    path, records = exported()
    mallory, real = Ed25519PrivateKey.generate(), keys.signing_key()
    entries = [r for r in records if r["type"] == "entry"]
    entries[0]["entry"]["actor"] = "mallory"
    # The attacker's key "retires" for the real one, signed by the attacker's key itself.
    at = entries[-1]["entry"]["at"]
    introduced = {k: v for k, v in signing.published_key(real.public_key(), at).items()
                  if k != "retired_at"}
    forged = json.loads(json.dumps(entries[-1]))
    forged["entry"].update(
        seq=len(entries) + 1, action="audit.key_rotated",
        before=signing.published_key(mallory.public_key(), at),
        after={**introduced, "previous_key_id": signing.key_id(mallory.public_key()),
               "signature_by_previous": signing.sign_rotation(mallory, introduced)})
    records.append(forged)
    last = next(r for r in reversed(records) if r["type"] == "checkpoint")
    records.insert(records.index(last) + 1, {**last, "size": len(entries) + 1})
    records[0]["size"] = len(entries) + 1
    rehash(records, mallory)
    status, out, err = verify(write(path, records), "--public-key", public_key)
    assert (status, out) == (1, "")
    assert err.startswith("FAILED at seq 1: unknown-key: checkpoint signed by key "
                          f"'{signing.key_id(mallory.public_key())}'"), err


# --- evidence bundles held against every witness checkpoint ------------------------------------


@pytest.fixture
def published_evidence(people, api_as, tmp_path, django_capture_on_commit_callbacks):
    """Dana fetches the refund agent's evidence; its checkpoint reaches the witness on commit."""

    def fetch() -> tuple[Path, dict]:
        with django_capture_on_commit_callbacks(execute=True):
            return evidence(api_as(people.dana), tmp_path)

    return fetch


def test_an_evidence_bundle_is_held_against_every_checkpoint_the_witness_holds(
        witness, public_key, trail, published_evidence, verify):
    path, document = published_evidence()
    head = document["checkpoint"]["size"]
    earlier = [size for size in witnessed(witness) if size < head]
    assert len(earlier) >= 2
    assert [item["size"] for item in document["consistency"]] == earlier
    status, out, err = verify(path, "--public-key", public_key, "--witness", str(witness))
    assert status == 0, err
    assert f"{len(earlier)} earlier witness checkpoints proven consistent with it" in out
    first = earlier[0]

    # A proof node changed: the bundle's head no longer extends the witness's checkpoint 5.
    document["consistency"][0]["proof"][0] = "ab" * 32
    status, out, err = verify(write_bundle(path, document), "--public-key", public_key,
                              "--witness", str(witness))
    assert (status, out) == (1, "")
    assert err.startswith(f"FAILED at seq {first}: witness-mismatch: the bundle's checkpoint "
                          f"{head} does not extend the witness's checkpoint {first} (key "), err
    assert f"the trail was rewritten at or below entry {first} after the witness saw it" in err

    # The proof left out: nothing shows the bundle's entries extend what the witness saw.
    document["consistency"] = document["consistency"][1:]
    status, out, err = verify(write_bundle(path, document), "--public-key", public_key,
                              "--witness", str(witness))
    assert (status, out) == (1, "")
    assert err.startswith(f"FAILED at seq {first}: witness-mismatch: the bundle carries no "
                          f"consistency proof from the witness's checkpoint {first} "), err


def witnessed(folder: Path) -> list[int]:
    """The sizes of the checkpoints a directory witness holds, oldest first."""
    return sorted(json.loads(p.read_text())["size"] for p in folder.iterdir())


def write_bundle(path: Path, document: dict) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_a_witness_of_another_trail_is_refused_against_an_evidence_bundle(
        witness, public_key, trail, published_evidence, verify):
    path, document = published_evidence()
    first = witnessed(witness)[0]
    copy_file = witness / f"checkpoint-{first:012d}.json"
    copy = json.loads(copy_file.read_text())
    copy_file.unlink()
    stranger = signing.sign_checkpoint(Ed25519PrivateKey.generate(), first, "ab" * 32,
                                       copy["at"])
    copy_file.write_text(json.dumps(stranger))
    status, out, err = verify(path, "--public-key", public_key, "--witness", str(witness))
    assert (status, out) == (1, "")
    assert err.startswith(f"FAILED at seq {first}: unknown-key: the witness's checkpoint {first} "
                          f"(key "), err
    assert "which is not a trusted key (another trail's witness, or a forged copy)" in err
    # Another installation's witness signed with this very key: its root is not a prefix.
    copy_file.unlink()
    copy_file.write_text(json.dumps(signing.sign_checkpoint(keys.signing_key(), first,
                                                            "ab" * 32, copy["at"])))
    status, out, err = verify(path, "--public-key", public_key, "--witness", str(witness))
    assert (status, out) == (1, "")
    assert err.startswith(f"FAILED at seq {first}: witness-mismatch: the bundle's checkpoint "
                          f"{document['checkpoint']['size']} does not extend the witness's "
                          f"checkpoint {first} "), err


def test_evidence_the_real_key_signed_after_a_rewrite_contradicts_the_auditors_witness(
        witness, public_key, trail, settings, published_evidence, verify):
    """An insider rewrites who did entry 2, remakes the tree, deletes the checkpoints that
    would object and the signer's memory, and disconnects the witness: the real key signs the
    forgery into an evidence bundle. The auditor's copy of the witness still refuses it."""
    from audit import signer
    from tests.audit.test_tamper import rewrite_from, sql
    from tests.audit.test_trust_anchors import rebuild_tree

    if connection.vendor == "postgresql":
        for table in ("auditentry", "auditcheckpoint", "audittreenode"):
            sql(f"ALTER TABLE audit_{table} DISABLE TRIGGER USER")
        sql(DROP_BINDING)
    first = witnessed(witness)[0]
    rewrite_from(2)
    rebuild_tree()
    sql("DELETE FROM audit_auditcheckpoint")
    signer.memory_file().unlink()
    settings.AUDIT_WITNESSES = []
    path, document = published_evidence()
    assert document["checkpoint"]["key_id"] == signing.key_id(keys.signing_key().public_key())
    status, out, err = verify(path, "--public-key", public_key)
    assert status == 0, err  # alone, the forgery holds: only the witness can object
    status, out, err = verify(path, "--public-key", public_key, "--witness", str(witness))
    assert (status, out) == (1, "")
    assert err.startswith(f"FAILED at seq {first}: witness-mismatch: the bundle carries no "
                          f"consistency proof from the witness's checkpoint {first} "), err
    # Keeping the deleted checkpoint's size in the bundle does not help: its proof fails.
    from audit.evidence import consistency_proofs

    document["consistency"] = consistency_proofs(document["checkpoint"]["size"],
                                                 {"auditor": dict.fromkeys(witnessed(witness))})
    status, out, err = verify(write_bundle(path, document), "--public-key", public_key,
                              "--witness", str(witness))
    assert (status, out) == (1, "")
    assert "witness-mismatch: the bundle's checkpoint" in err
    assert f"does not extend the witness's checkpoint {first} " in err, err


def test_the_export_keys_edited_in_the_database_are_never_trusted_offline(
        public_key, trail, exported, verify):
    """The export's key lines come from the database's key table; an insider who puts their own
    key there and re-signs with it is still an unknown key to the auditor."""
    path, records = exported()
    mallory = Ed25519PrivateKey.generate()
    next(r for r in records if r["type"] == "entry")["entry"]["actor"] = "mallory"
    rehash(records, mallory)
    records = [r for r in records if r["type"] != "key"]
    records.insert(1, {"type": "key", **signing.published_key(mallory.public_key(),
                                                              records[-1]["entry"]["at"])})
    status, out, err = verify(write(path, records), "--public-key", public_key)
    assert (status, out) == (1, "")
    assert err.startswith(f"FAILED at seq 1: unknown-key: checkpoint signed by key "
                          f"'{signing.key_id(mallory.public_key())}', which is not a trusted "
                          f"key"), err
