"""Two verifiers, one format: the TypeScript `agentgov-audit verify` (written from
docs/audit-format.md) and `agentctl audit verify` give the same verdict on the same files, made
by the real control plane and tampered in each way an insider could try. Then the TypeScript
verifier alone on the trust rules of issue 28 (unsigned when a key is given and nothing is
signed, chain-only asked for and said, a retired key proving nothing past its rotation)."""

import base64
import json
import re
import subprocess
from pathlib import Path

import pytest
from agentgov import checkpoints as signing
from agentgov.entries import entry_hash
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import audit
from audit import keys
from audit.choices import AuditAction
from tests.audit.conftest import key_file  # noqa: F401 (autouse: rotations stay this test's)
from tests.audit.test_offline_verify import (  # noqa: F401 (fixtures)
    checkpoints_key_file,
    evidence,
    exported,
    public_key,
    rehash,
    trail,
    verify,
    witness,
    write,
)
from tests.clients.test_typescript import TS, node_modules, npm  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

FAILED = re.compile(r"^FAILED at seq (\d+): ([a-z-]+): ")


@pytest.fixture(scope="session")
def ts_built(node_modules) -> Path:  # noqa: F811
    result = npm("run", "build")
    assert result.returncode == 0, result.stdout + result.stderr
    return TS / "dist" / "audit" / "cli.js"


@pytest.fixture
def ts_verify(ts_built):
    def run(path: Path, *args: str) -> tuple[int, str, str]:
        done = subprocess.run(["node", str(ts_built), "verify", str(path), *args],
                              capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr

    return run


def verdict(status: int, out: str, err: str) -> tuple:
    """What both verifiers must agree on: OK with the same count and head, or FAILED at the
    same seq for the same reason."""
    if status == 0:
        return ("OK", out.splitlines()[0])
    first = err.splitlines()[0] if err else ""
    match = FAILED.match(first)
    assert status == 1 and match, (status, out, err)
    return ("FAILED", int(match.group(1)), match.group(2))


@pytest.fixture
def both(verify, ts_verify):  # noqa: F811
    def run(path: Path, *args: str) -> tuple:
        python, typescript = verify(path, *args), ts_verify(path, *args)
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
    ("checkpoint", "rehashed"),
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


# --- issue 28's rules, the TypeScript verifier alone ------------------------------------------


def test_a_key_or_witness_given_and_nothing_signed_is_unsigned_not_ok(
        witness, public_key, trail, exported, api_as, people, tmp_path, ts_verify):  # noqa: F811
    path, records = exported()
    entries_only = [r for r in records if r["type"] != "checkpoint"]
    status, out, err = ts_verify(write(path, entries_only), "--public-key", public_key)
    assert (status, out) == (1, "") and err.startswith("FAILED at seq 1: unsigned: "), err
    status, _, err = ts_verify(path, "--public-key", public_key, "--witness", str(witness))
    assert status == 1 and FAILED.match(err).group(2) in ("unsigned", "witness-mismatch"), err

    body = b"".join(api_as(people.dana).get("/api/v1/audit/export?format=csv")).decode("utf-8")
    csv_path = tmp_path / "trail.csv"
    csv_path.write_text(body, encoding="utf-8", newline="")
    status, _, err = ts_verify(csv_path, "--public-key", public_key)
    assert status == 1 and err.startswith("FAILED at seq 1: unsigned: "), err
    status, _, err = ts_verify(csv_path, "--witness", str(witness))
    assert status == 1 and err.startswith("FAILED at seq 1: unsigned: "), err


def test_chain_only_must_be_asked_for_and_says_so(public_key, trail, exported, api_as, people,  # noqa: F811
                                                  tmp_path, ts_verify):
    path, records = exported()
    status, out, err = ts_verify(path)  # nothing trusted, and not asked for a chain-only check
    assert status == 2 and "--chain-only" in err and out == ""
    status, out, _ = ts_verify(path, "--chain-only")
    assert status == 3
    assert out.splitlines()[0] == (f"OK {records[0]['size']} entries, head "
                                   f"{records[-1]['entry']['hash']}: chain only, nothing proven "
                                   "by a signature")
    status, _, err = ts_verify(path, "--chain-only", "--public-key", public_key)
    assert status == 2 and "--chain-only" in err

    body = b"".join(api_as(people.dana).get("/api/v1/audit/export?format=csv")).decode("utf-8")
    csv_path = tmp_path / "trail.csv"
    csv_path.write_text(body, encoding="utf-8", newline="")
    status, out, _ = ts_verify(csv_path, "--chain-only")
    assert status == 3 and "chain only" in out.splitlines()[0]
    edited = re.sub(r"token:3,", "token:4,", body, count=1)
    assert edited != body
    csv_path.write_text(edited, encoding="utf-8", newline="")
    status, _, err = ts_verify(csv_path, "--chain-only")
    assert status == 1 and FAILED.match(err).group(2) == "edited", err
    help_text = subprocess.run(["node", str(TS / "dist" / "audit" / "cli.js"), "--help"],
                               capture_output=True, text=True, check=True).stdout
    assert "chain only" in help_text and "unsigned" in help_text


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
