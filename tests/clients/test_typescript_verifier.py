"""Two verifiers, one format: the TypeScript `agentgov-audit verify` (written from
docs/audit-format.md) and `agentctl audit verify` give the same verdict on the same files, made
by the real control plane and tampered in each way an insider could try. Then the TypeScript
verifier alone on the trust rules of issue 28 (unsigned when a key is given and nothing is
signed, chain-only asked for and said, a retired key proving nothing past its rotation)."""

import base64
import json
import re
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from agentgov import checkpoints as signing
from agentgov.entries import entry_hash
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db import connection
from django.utils import timezone

import audit
from audit import keys
from audit.choices import AuditAction
from audit.models import AuditEntry
from tests.audit.conftest import key_file  # noqa: F401 (autouse: rotations stay this test's)
from tests.audit.test_archive import archive, grant, live_export, old_then_new  # noqa: F401
from tests.audit.test_offline_verify import (  # noqa: F401 (fixtures)
    checkpoints_key_file,
    evidence,
    exported,
    public_key,
    published_evidence,
    rehash,
    trail,
    verify,
    witness,
    witnessed,
    write,
    write_bundle,
)
from tests.clients.test_typescript import TS, node_modules, npm  # noqa: F401 (fixture)
from tests.compliance.test_framework_evidence import history  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

FAILED = re.compile(r"^FAILED at seq (\d+): ([a-z-]+): ")
BROKEN = re.compile(r"^BROKEN at seq (\d+)$")


@pytest.fixture(scope="session")
def ts_built(node_modules) -> Path:  # noqa: F811
    result = npm("run", "build")
    assert result.returncode == 0, result.stdout + result.stderr
    return TS / "dist" / "audit" / "cli.js"


@pytest.fixture
def ts_verify(ts_built):
    def run(path: Path, *args: str | Path) -> tuple[int, str, str]:
        done = subprocess.run(["node", str(ts_built), "verify", str(path), *map(str, args)],
                              capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr

    return run


def verdict(status: int, out: str, err: str) -> tuple:
    """What both verifiers must agree on: the exit status and the first line's words (OK or
    CHAIN ONLY with the same count and head, FAILED at the same seq for the same reason, BROKEN
    at the same seq, or a usage mistake)."""
    if status in (0, 3):
        first = out.splitlines()[0]
        assert first.startswith("OK " if status == 0 else "CHAIN ONLY "), (status, out, err)
        return ("OK" if status == 0 else "CHAIN ONLY", first)
    first = err.splitlines()[0] if err else ""
    if status == 2:
        assert first.startswith("error: ") and out == "", (status, out, err)
        return ("USAGE",)
    assert status == 1 and out == "", (status, out, err)
    if match := BROKEN.match(first):
        return ("BROKEN", int(match.group(1)))
    match = FAILED.match(first)
    assert match, (status, out, err)
    return ("FAILED", int(match.group(1)), match.group(2))


@pytest.fixture
def both(verify, ts_verify):  # noqa: F811
    def run(path: Path, *args: str | Path) -> tuple:
        python, typescript = verify(path, *map(str, args)), ts_verify(path, *args)
        assert verdict(*python) == verdict(*typescript), (python, typescript)
        return verdict(*typescript)

    return run


def test_an_untouched_export_and_each_tampered_one_get_the_same_verdict_from_both(
        public_key, trail, people, exported, both, django_capture_on_commit_callbacks):  # noqa: F811
    # Numbers as Python spells them (800.0): the hash covers their spelling, so a verifier that
    # re-spells them (JavaScript: 800) would call an honest trail edited.
    with django_capture_on_commit_callbacks(execute=True):
        audit.record(actor=people.alice, action=AuditAction.TOKEN_ISSUED, target="numbers",
                     after={"amount": 800.0, "rate": 0.125, "n": -3,
                            "text": "caf\u00e9 \U0001f600 \"quoted\" \\ \t"})
    path, records = exported()
    size = records[0]["size"]
    assert both(path, "--public-key", public_key)[0] == "OK"
    original = path.read_text(encoding="utf-8")

    def tampered(change) -> Path:
        records = [json.loads(line) for line in original.splitlines()]
        records = change(records) or records
        return write(path, records)

    def entries(records):
        return [r for r in records if r["type"] == "entry"]

    def edit(records):
        entries(records)[2]["entry"]["actor"] = "mallory"

    def delete(records):
        records.remove(entries(records)[3])

    def truncate(records):
        return records[:-2]

    def rehash_other_key(records):
        entries(records)[0]["entry"]["reason"] = "nothing to see"
        rehash(records, Ed25519PrivateKey.generate())

    def rehash_claiming_trusted_key(records):
        entries(records)[0]["entry"]["reason"] = "nothing to see"
        rehash(records, Ed25519PrivateKey.generate(), key_id=records[1]["key_id"])

    def append_unsigned(records):
        last = entries(records)[-1]
        extra = json.loads(json.dumps(last))
        extra["entry"].update(seq=size + 1, prev_hash=last["entry"]["hash"])
        extra["entry"]["hash"] = entry_hash(extra["entry"])
        records.append(extra)

    def amount_respelled(records):  # 800.0 and 800 hash differently: the spelling is hashed
        numbers = next(r for r in entries(records) if r["entry"]["target"] == "numbers")
        numbers["entry"]["after"]["amount"] = 800

    expected = {edit: ("FAILED", 3, "edited"), delete: ("FAILED", 4, "deleted"),
                truncate: ("FAILED", size - 1, "truncated"),
                rehash_other_key: ("FAILED", 1, "unknown-key"),
                rehash_claiming_trusted_key: ("FAILED", 1, "rehashed"),
                append_unsigned: ("FAILED", size + 1, "unsigned"),
                amount_respelled: ("FAILED", next(r["entry"]["seq"] for r in entries(records)
                                                    if r["entry"]["target"] == "numbers"),
                                   "edited")}
    for change, outcome in expected.items():
        assert both(tampered(change), "--public-key", public_key) == outcome, change.__name__


def test_witness_verdicts_agree(witness, public_key, trail, exported, both):  # noqa: F811
    path, records = exported()
    assert both(path, "--public-key", public_key, "--witness", str(witness))[0] == "OK"
    original = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    first = next(r["size"] for r in original if r["type"] == "checkpoint")
    cut = [r for r in original if r["type"] == "key"
           or (r["type"] == "checkpoint" and r["size"] <= first)
           or (r["type"] == "entry" and r["entry"]["seq"] <= first)]
    cut.insert(0, {**original[0], "size": first})
    assert both(write(path, cut), "--public-key", public_key)[0] == "OK"
    assert both(path, "--public-key", public_key, "--witness", str(witness)) == (
        "FAILED", first + 1, "truncated")

    forked = json.loads(json.dumps(original))
    next(r for r in forked if r["type"] == "entry")["entry"]["actor"] = "mallory"
    rehash(forked, keys.signing_key())  # the operator holds the key: only the witness objects
    assert both(write(path, forked), "--public-key", public_key)[0] == "OK"
    assert both(path, "--public-key", public_key, "--witness", str(witness)) == (
        "FAILED", first, "witness-mismatch")

    write(path, original)
    last = original[0]["size"]
    (witness / f"checkpoint-{last:012d}.json").unlink()
    assert both(path, "--public-key", public_key, "--witness", str(witness)) == (
        "FAILED", last, "witness-missing")


@pytest.mark.parametrize("tamper, reason", [
    (None, None), ("edit", "edited"), ("proof", "edited"), ("other-key", "unknown-key"),
    ("checkpoint", "rehashed"), ("agent", "edited"), ("period", "edited"), ("order", "edited"),
])
def test_evidence_bundle_verdicts_agree(public_key, trail, people, api_as, tmp_path, both,  # noqa: F811
                                        tamper, reason):
    path, document = evidence(api_as(people.dana), tmp_path)
    item = document["entries"][1]
    seq = item["entry"]["seq"]
    if tamper == "edit":
        item["entry"]["reason"] = "approved by the board"
        item["entry"]["hash"] = entry_hash(item["entry"])
    elif tamper == "proof":
        item["proof"][0] = "00" * 32
    elif tamper == "other-key":
        document["checkpoint"] = signing.sign_checkpoint(
            Ed25519PrivateKey.generate(), document["checkpoint"]["size"],
            document["checkpoint"]["root"], document["checkpoint"]["at"])
        seq = 1
    elif tamper == "checkpoint":
        document["checkpoint"]["size"] += 1
        seq = 1
    elif tamper == "agent":  # every entry proven, but the bundle claims they are another's
        document["agent"] = "support-agent"
        seq = document["entries"][0]["entry"]["seq"]
    elif tamper == "period":  # the first entry falls a microsecond before the period
        first = document["entries"][0]["entry"]["at"]
        moment = datetime.fromisoformat(first) + timedelta(microseconds=1)
        document["from"] = moment.isoformat().replace("+00:00", "Z")
        seq = document["entries"][0]["entry"]["seq"]
    elif tamper == "order":  # the entries shuffled: reported just past the one before
        document["entries"][0], document["entries"][1] = item, document["entries"][0]
        seq = item["entry"]["seq"] + 1
    path.write_text(json.dumps(document), encoding="utf-8")
    outcome = both(path, "--public-key", public_key)
    assert outcome[0] == "OK" if tamper is None else outcome == ("FAILED", seq, reason)


def test_after_a_rotation_both_prove_the_export_with_the_first_key_alone(
        public_key, trail, people, settings, exported, both, ts_verify):  # noqa: F811
    from audit.actions import rotate_key

    new_key = Ed25519PrivateKey.generate()
    rotate_key(actor=people.dana, new_key=new_key)
    settings.AUDIT_PRIVATE_KEY = keys.private_key_pem(new_key).decode()
    for n in range(6):
        audit.record(actor=people.alice, action=AuditAction.TOKEN_ISSUED, target=f"later:{n}")
    path, records = exported()
    assert both(path, "--public-key", public_key)[0] == "OK"
    new_id = signing.key_id(new_key.public_key())
    assert f"key {new_id} trusted from the rotation at seq " in ts_verify(
        path, "--public-key", public_key)[1]
    raw = new_key.public_key().public_bytes(serialization.Encoding.Raw,
                                            serialization.PublicFormat.Raw)
    assert both(path, "--public-key", base64.b64encode(raw).decode()) == (
        "FAILED", 1, "unknown-key")

    # Issue 28: the old key signs nothing past the checkpoint that proved its rotation, so a
    # checkpoint past it re-signed with the retired (perhaps leaked) key proves nothing.
    rotation = next(r["entry"] for r in records
                    if r["type"] == "entry" and r["entry"]["action"] == "audit.key_rotated")
    rehash(records, checkpoints_key_file(settings))
    status, _, err = ts_verify(write(path, records), "--public-key", public_key)
    assert status == 1, err
    seq, reason = FAILED.match(err).groups()
    assert reason == "retired-key" and int(seq) > rotation["seq"], err


def test_archives_and_the_live_export_joined_as_one_trail_get_the_same_verdict_from_both(
        old_then_new, tmp_path, people, api_as, django_capture_on_commit_callbacks,  # noqa: F811
        public_key, both):  # noqa: F811
    first = archive(old_then_new, tmp_path / "archive")
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(15, 22):
            grant(people, n)
    second = archive(timezone.now(), tmp_path / "archive")
    assert first is not None and second is not None
    files = [tmp_path / "archive" / first.file_name, tmp_path / "archive" / second.file_name]
    live = live_export(people, api_as, django_capture_on_commit_callbacks, tmp_path)
    head = AuditEntry.objects.order_by("-seq").first()

    for path in [*files, live]:  # each file alone proves itself from its boundary
        assert both(path, "--public-key", public_key)[0] == "OK", path.name
    assert both(*files, live, "--public-key", public_key) == (
        "OK", f"OK {head.seq} entries, head {head.hash}")
    assert both(*files, live) == ("USAGE",)  # nothing trusted to prove them with

    # The middle archive left out: a gap. A boundary that does not continue: edited.
    assert both(files[0], live, "--public-key", public_key) == (
        "FAILED", first.last_seq + 1, "deleted")
    assert both(live, files[0], "--public-key", public_key)[0] == "FAILED"  # out of order
    records = [json.loads(line) for line in live.read_text().splitlines()]
    records[0]["boundary"]["hash"] = "0" * 64
    forged = write(tmp_path / "forged.jsonl", records)
    assert both(*files, forged, "--public-key", public_key) == (
        "FAILED", second.last_seq + 1, "edited")
    # An archive edited after the fact, and a live export whose checkpoints were dropped.
    lines = [json.loads(line) for line in files[0].read_text().splitlines()]
    next(r for r in lines if r["type"] == "entry")["entry"]["reason"] = "rewritten"
    edited = write(tmp_path / "edited.jsonl", lines)
    assert both(edited, files[1], live, "--public-key", public_key) == ("FAILED", 1, "edited")
    records[0] = json.loads(live.read_text().splitlines()[0])  # the true boundary again
    unsigned = write(tmp_path / "unsigned.jsonl",
                     [r for r in records if r["type"] != "checkpoint"])
    assert both(*files, unsigned, "--public-key", public_key) == (
        "FAILED", second.last_seq + 1, "unsigned")

    # A CSV export of the live part after the archives: unsigned, or asked for, chain only.
    with django_capture_on_commit_callbacks(execute=True):
        body = b"".join(api_as(people.dana).get("/api/v1/audit/export?format=csv")).decode()
    spreadsheet = tmp_path / "live.csv"
    spreadsheet.write_text(body, encoding="utf-8", newline="")
    csv_head = body.splitlines()[-1].split(",")[-1]
    csv_count = int(body.splitlines()[-1].split(",")[0])
    assert both(*files, spreadsheet, "--public-key", public_key) == (
        "FAILED", second.last_seq + 1, "unsigned")
    assert both(*files, spreadsheet, "--public-key", public_key, "--chain-only") == (
        "CHAIN ONLY", f"CHAIN ONLY {csv_count} entries, head {csv_head}: chain only, nothing "
                      "proven by a signature")
    assert both(spreadsheet, "--chain-only") == ("FAILED", 1, "deleted")  # archives missing
    rows = body.splitlines(keepends=True)
    cut = tmp_path / "cut.csv"
    cut.write_text(rows[0] + "".join(rows[2:]), encoding="utf-8", newline="")
    assert both(*files, cut, "--public-key", public_key, "--chain-only") == (
        "FAILED", second.last_seq + 1, "deleted")
    changed = tmp_path / "changed.csv"
    changed.write_text(rows[0] + rows[1].replace("token:", "token:9", 1) + "".join(rows[2:]),
                       encoding="utf-8", newline="")
    assert both(*files, changed, "--public-key", public_key, "--chain-only") == (
        "FAILED", second.last_seq + 1, "edited")


def test_with_a_witness_archives_and_the_live_export_join_in_both(
        settings, tmp_path, people, refund_agent, api_as, django_capture_on_commit_callbacks,
        both):
    copies = tmp_path / "witness"
    settings.AUDIT_WITNESSES = [f"file://{copies}"]
    settings.AUDIT_CHECKPOINT_EVERY = 5
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(12):
            grant(people, n)
        cut = timezone.now()
        for n in range(12, 15):
            grant(people, n, agent="refund-agent")
        made = archive(cut, tmp_path / "archive")
    key = api_as(people.dana).get("/api/v1/audit/keys").json()["keys"][0]["public_key"]
    live = live_export(people, api_as, django_capture_on_commit_callbacks, tmp_path)
    archived = tmp_path / "archive" / made.file_name
    assert both(archived, live, "--public-key", key, "--witness", copies)[0] == "OK"
    newest = max(int(p.stem.split("-")[1]) for p in copies.glob("checkpoint-*.json"))
    (copies / f"checkpoint-{newest:012d}.json").unlink()
    assert both(archived, live, "--public-key", key, "--witness", copies) == (
        "FAILED", newest, "witness-missing")


def test_an_evidence_bundle_held_against_the_witness_gets_the_same_verdict_from_both(
        witness, public_key, trail, published_evidence, tmp_path, both):  # noqa: F811
    path, document = published_evidence()
    head = document["checkpoint"]["size"]
    earlier = [size for size in witnessed(witness) if size < head]
    assert len(earlier) >= 2 and [item["size"] for item in document["consistency"]] == earlier
    assert both(path, "--public-key", public_key, "--witness", witness)[0] == "OK"
    original = json.dumps(document)

    def changed(change) -> Path:
        bundle = json.loads(original)
        change(bundle)
        return write_bundle(path, bundle)

    def node_changed(bundle):  # the head no longer extends the witness's first checkpoint
        bundle["consistency"][0]["proof"][0] = "ab" * 32

    def proof_left_out(bundle):  # nothing shows the entries extend what the witness saw
        bundle["consistency"] = bundle["consistency"][1:]

    def unreadable(bundle):
        bundle["consistency"] = "proven, trust me"

    for change, outcome in {node_changed: ("FAILED", earlier[0], "witness-mismatch"),
                            proof_left_out: ("FAILED", earlier[0], "witness-mismatch"),
                            unreadable: ("FAILED", 1, "edited")}.items():
        assert both(changed(change), "--public-key", public_key, "--witness", witness) == \
            outcome, change.__name__
    # Without a witness the proofs are not needed, and the bundle still proves its entries.
    assert both(changed(proof_left_out), "--public-key", public_key)[0] == "OK"
    # A witness directory that is not there holds nothing: the bundle's checkpoint is missing
    # from it (docs/audit-format.md does not make it a usage mistake; agentctl reads it so).
    assert both(write_bundle(path, json.loads(original)), "--public-key", public_key,
                "--witness", tmp_path / "no-such-witness") == ("FAILED", head, "witness-missing")


def test_a_witness_of_another_trail_is_refused_by_both_against_an_evidence_bundle(
        witness, public_key, trail, published_evidence, both):  # noqa: F811
    path, document = published_evidence()
    first = witnessed(witness)[0]
    copy_file = witness / f"checkpoint-{first:012d}.json"
    copy = json.loads(copy_file.read_text())
    copy_file.unlink()
    copy_file.write_text(json.dumps(signing.sign_checkpoint(Ed25519PrivateKey.generate(), first,
                                                            "ab" * 32, copy["at"])))
    assert both(path, "--public-key", public_key, "--witness", witness) == (
        "FAILED", first, "unknown-key")
    # Another installation's witness signed with this very key: its root is not a prefix.
    copy_file.unlink()
    copy_file.write_text(json.dumps(signing.sign_checkpoint(keys.signing_key(), first, "ab" * 32,
                                                            copy["at"])))
    assert both(path, "--public-key", public_key, "--witness", witness) == (
        "FAILED", first, "witness-mismatch")


def test_evidence_the_real_key_signed_after_a_rewrite_is_refused_by_both_given_the_witness(
        witness, public_key, trail, settings, published_evidence, both):  # noqa: F811
    """The insider rewrites entry 2, remakes the tree, deletes the checkpoints and the signer's
    memory and disconnects the witness; the real key signs the forgery into a bundle."""
    from audit import signer
    from audit.evidence import consistency_proofs
    from tests.audit.attacker import DROP_BINDING
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
    assert both(path, "--public-key", public_key)[0] == "OK"  # alone, the forgery holds
    assert both(path, "--public-key", public_key, "--witness", witness) == (
        "FAILED", first, "witness-mismatch")
    # Proofs from the witness's sizes do not help: the rewritten head does not extend them.
    document["consistency"] = consistency_proofs(document["checkpoint"]["size"],
                                                 {"auditor": dict.fromkeys(witnessed(witness))})
    assert both(write_bundle(path, document), "--public-key", public_key, "--witness",
                witness) == ("FAILED", first, "witness-mismatch")


def test_an_export_against_a_witness_directory_that_is_not_there_fails_in_both(
        public_key, trail, exported, tmp_path, both):  # noqa: F811
    """docs/audit-format.md names no usage mistake for it: like agentctl, the TypeScript
    verifier reads it as a witness holding nothing, so every checkpoint of the file is missing
    from it."""
    path, records = exported()
    first = next(r["size"] for r in records if r["type"] == "checkpoint")
    assert both(path, "--public-key", public_key, "--witness", tmp_path / "absent") == (
        "FAILED", first, "witness-missing")


def test_a_checkpoint_size_given_twice_is_proven_twice_by_both(
        public_key, trail, exported, both):  # noqa: F811
    """Each copy must hold on its own: a second signature by the trusted key over the same root
    proves the same entries again; one over another root fails as a re-hash past the first."""
    path, records = exported()
    at = next(i for i, r in enumerate(records) if r["type"] == "checkpoint")
    checkpoint = records[at]
    size = checkpoint["size"]
    again = {"type": "checkpoint", **signing.sign_checkpoint(
        keys.signing_key(), size, checkpoint["root"], "2026-12-01T00:00:00.000000Z")}
    assert again != checkpoint
    assert both(write(path, [*records[:at + 1], again, *records[at + 1:]]),
                "--public-key", public_key)[0] == "OK"
    other = {"type": "checkpoint", **signing.sign_checkpoint(
        keys.signing_key(), size, "ab" * 32, checkpoint["at"])}
    assert both(write(path, [*records[:at + 1], other, *records[at + 1:]]),
                "--public-key", public_key) == ("FAILED", size + 1, "rehashed")


# --- issue 28's rules, the TypeScript verifier alone ------------------------------------------


def test_a_key_or_witness_given_and_nothing_signed_is_unsigned_not_ok(
        witness, public_key, trail, exported, api_as, people, tmp_path, both):  # noqa: F811
    path, records = exported()
    entries_only = [r for r in records if r["type"] != "checkpoint"]
    assert both(write(path, entries_only), "--public-key", public_key) == ("FAILED", 1, "unsigned")
    # The witness's signed copies prove what the file's dropped checkpoints no longer do.
    assert both(path, "--public-key", public_key, "--witness", witness)[0] == "OK"

    body = b"".join(api_as(people.dana).get("/api/v1/audit/export?format=csv")).decode("utf-8")
    csv_path = tmp_path / "trail.csv"
    csv_path.write_text(body, encoding="utf-8", newline="")
    assert both(csv_path, "--public-key", public_key) == ("FAILED", 1, "unsigned")
    assert both(csv_path, "--witness", witness) == ("USAGE",)  # nothing trusted to prove it with
    bare = tmp_path / "entries.jsonl"  # an entries-only JSONL, one entry object a line
    bare.write_text("".join(json.dumps(r["entry"]) + "\n" for r in records if r["type"] == "entry"))
    assert both(bare, "--public-key", public_key) == ("FAILED", 1, "unsigned")
    assert both(bare, "--public-key", public_key, "--witness", witness)[0] == "OK"
    assert both(bare, "--chain-only")[0] == "CHAIN ONLY"


def test_chain_only_must_be_asked_for_and_says_so(public_key, trail, exported, api_as, people,  # noqa: F811
                                                  tmp_path, both, ts_verify):
    path, records = exported()
    assert both(path) == ("USAGE",)  # nothing trusted, and not asked for a chain-only check
    assert both(tmp_path / "absent.jsonl", "--public-key", public_key) == ("USAGE",)
    assert both(path, "--public-key", "c2hvcnQ=") == ("USAGE",)  # not a key
    # A v1 export is proven by its signatures: checking its chain alone is not offered.
    assert both(path, "--chain-only") == ("USAGE",)
    assert both(path, "--chain-only", "--public-key", public_key) == ("USAGE",)

    body = b"".join(api_as(people.dana).get("/api/v1/audit/export?format=csv")).decode("utf-8")
    csv_path = tmp_path / "trail.csv"
    csv_path.write_text(body, encoding="utf-8", newline="")
    assert both(csv_path) == ("USAGE",)
    head = body.splitlines()[-1].split(",")[-1]
    count = len(body.splitlines()) - 1
    assert both(csv_path, "--chain-only") == (
        "CHAIN ONLY", f"CHAIN ONLY {count} entries, head {head}: chain only, nothing proven by a "
                      "signature")
    edited = re.sub(r"token:3,", "token:4,", body, count=1)
    assert edited != body
    csv_path.write_text(edited, encoding="utf-8", newline="")
    seq = next(int(line.split(",")[0]) for line in edited.splitlines()[1:] if "token:4," in line)
    assert both(csv_path, "--chain-only") == ("BROKEN", seq)
    help_text = subprocess.run(["node", str(TS / "dist" / "audit" / "cli.js"), "--help"],
                               capture_output=True, text=True, check=True).stdout
    assert "CHAIN ONLY" in help_text and "unsigned" in help_text and "FILE..." in help_text


def test_a_key_range_from_configuration_bounds_what_the_key_proves(
        public_key, trail, exported, tmp_path, ts_verify):  # noqa: F811
    path, records = exported()
    first = next(r["size"] for r in records if r["type"] == "checkpoint")
    configured = tmp_path / "keys.json"
    configured.write_text(json.dumps({"keys": [{"public_key": public_key, "max_size": first}]}))
    status, _, err = ts_verify(path, "--public-key", str(configured))
    assert status == 1 and FAILED.match(err).groups() == (str(first + 1), "retired-key"), err
    configured.write_text(json.dumps([{"public_key": public_key, "min_size": 0}]))
    assert ts_verify(path, "--public-key", str(configured))[0] == 0


def test_a_framework_report_bundle_and_each_tampered_one_get_the_same_verdict_from_both(
        history, people, api_as, tmp_path, both):  # noqa: F811
    dana = api_as(people.dana)
    (key,) = [k["public_key"] for k in dana.get("/api/v1/audit/keys").json()["keys"]
              if k["retired_at"] is None]
    response = dana.get("/api/v1/frameworks/nist-ai-rmf/evidence", {"agent": "refund-agent"})
    assert response.status_code == 200, response.content
    document = response.json()
    path = tmp_path / "report.json"

    def write_report(bundle: dict) -> Path:
        path.write_text(json.dumps(bundle), encoding="utf-8")
        return path

    assert both(write_report(document), "--public-key", key)[0] == "OK"

    def tampered(change) -> tuple:
        copy = json.loads(json.dumps(document))
        change(copy)
        return both(write_report(copy), "--public-key", key)

    def greener(copy):
        copy["report"]["controls"][0]["colour"] = "red"

    def cover_up(copy):
        next(i for i in copy["entries"] if i["entry"]["action"] == "decision.expired")[
            "entry"]["actor"] = "carol"

    def dropped(copy):
        copy["entries"] = [i for i in copy["entries"]
                           if i["entry"]["action"] != "decision.decided"]

    def unsigned_head(copy):
        copy["heads"] = []

    size = document["checkpoint"]["size"]
    assert tampered(greener) == ("FAILED", size, "edited")
    assert tampered(cover_up)[0::2] == ("FAILED", "edited")
    assert tampered(dropped)[0::2] == ("FAILED", "deleted")
    assert tampered(unsigned_head)[0::2] == ("FAILED", "deleted")
