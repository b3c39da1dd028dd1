"""Signed tree heads as an outside auditor checks them: Ed25519 checkpoints over the Merkle root,
the public key from `manage.py audit public-key`, inclusion and consistency proofs from the API,
all checked with the client package's own verifier code, and key rotation."""

import io
import os
import stat

import pytest
from agentgov import checkpoints as signed_heads
from agentgov import merkle
from agentgov.entries import entry_leaf_hash
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import call_command
from django.test import override_settings

import audit
from audit import keys
from audit.actions import sequence_pending
from audit.choices import AuditAction
from audit.models import AuditPendingEntry
from audit.verify import verify_trail

pytestmark = pytest.mark.django_db


def append(n: int, actor: str = "alice") -> None:
    for i in range(n):
        audit.record(actor=actor, action=AuditAction.ROLE_GRANTED, target=f"user:u{i}",
                     after={"roles": ["owner"], "i": i})


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("audit", *args, stdout=out)
    return out.getvalue().strip()


def trusted_key() -> dict[str, object]:
    public = signed_heads.load_public_key(run("public-key", "--format", "base64"))
    return {signed_heads.key_id(public): public}


def all_entries(client) -> list[dict]:
    entries, url = [], "/api/v1/audit/entries?page_size=500"
    while url:
        page = client.get(url).json()
        entries += page["results"]
        url = page["next"]
    return sorted(entries, key=lambda entry: entry["seq"])


def leaves(client) -> list[bytes]:
    return [entry_leaf_hash(entry) for entry in all_entries(client)]


@override_settings(AUDIT_CHECKPOINT_EVERY=4)
def test_checkpoints_are_ed25519_tree_heads_that_the_published_key_verifies(people, api_as):
    dana = api_as(people.dana)
    append(9)
    heads = dana.get("/api/v1/audit/checkpoints").json()["results"]
    assert heads and all(head["algorithm"] == "ed25519" for head in heads)
    trusted = trusted_key()
    assert [key["key_id"] for key in dana.get("/api/v1/audit/keys").json()["keys"]] == \
        list(trusted)
    hashes = leaves(dana)
    for head in heads:
        signed_heads.verify_checkpoint(head, trusted)
        assert head["root"] == merkle.root(hashes[:head["size"]]).hex()
    forged = {**heads[0], "size": heads[0]["size"] + 1}
    with pytest.raises(signed_heads.SignatureError):
        signed_heads.verify_checkpoint(forged, trusted)


@override_settings(AUDIT_CHECKPOINT_EVERY=5)
def test_every_entry_has_an_inclusion_proof_to_a_signed_root(people, api_as):
    dana = api_as(people.dana)
    append(12)
    hashes = leaves(dana)
    trusted = trusted_key()
    head = dana.get("/api/v1/audit/checkpoints").json()["results"][0]
    signed_heads.verify_checkpoint(head, trusted)
    for seq in range(1, head["size"] + 1):
        proof = dana.get(f"/api/v1/audit/proofs/inclusion?seq={seq}").json()
        assert (proof["seq"], proof["leaf_index"], proof["tree_size"]) == (seq, seq - 1,
                                                                          head["size"])
        assert proof["leaf_hash"] == hashes[seq - 1].hex()
        merkle.verify_inclusion(seq - 1, head["size"], hashes[seq - 1],
                                [bytes.fromhex(h) for h in proof["proof"]],
                                bytes.fromhex(head["root"]))
    # A proof for one entry does not prove another.
    proof = dana.get("/api/v1/audit/proofs/inclusion?seq=3").json()
    with pytest.raises(merkle.ProofError):
        merkle.verify_inclusion(3, head["size"], hashes[3], [bytes.fromhex(h) for h in
                                                             proof["proof"]],
                                bytes.fromhex(head["root"]))


def test_consistency_proofs_hold_between_any_two_sizes(people, api_as):
    dana = api_as(people.dana)
    append(14)
    hashes = leaves(dana)
    size = len(hashes)
    for first in range(1, size + 1):
        for second in range(first, size + 1):
            proof = dana.get(f"/api/v1/audit/proofs/consistency?first={first}&second={second}")
            assert proof.status_code == 200
            merkle.verify_consistency(first, second, merkle.root(hashes[:first]),
                                      merkle.root(hashes[:second]),
                                      [bytes.fromhex(h) for h in proof.json()["proof"]])
    inclusion = dana.get(f"/api/v1/audit/proofs/inclusion?seq=7&size={size - 1}").json()
    merkle.verify_inclusion(6, size - 1, hashes[6], [bytes.fromhex(h) for h in
                                                     inclusion["proof"]],
                            merkle.root(hashes[:size - 1]))


@pytest.mark.parametrize("query, pointer", [
    ("inclusion?seq=0", "/seq"),
    ("inclusion?seq=abc", "/seq"),
    ("inclusion", "/seq"),
    ("inclusion?seq=9999", "/seq"),
    ("inclusion?seq=3&size=2", "/size"),
    ("inclusion?seq=3&size=99999", "/size"),
    ("consistency?first=3&second=2", "/first"),
    ("consistency?first=1&second=99999", "/second"),
    ("consistency?first=-1&second=2", "/first"),
    ("consistency?first=1", "/second"),
])
def test_impossible_proofs_are_refused_with_the_field_named(people, api_as, query, pointer):
    response = api_as(people.dana).get(f"/api/v1/audit/proofs/{query}")
    assert response.status_code == 400
    assert pointer in [detail["pointer"] for detail in response.json()["error"]["details"]]


@pytest.mark.parametrize("sequencer", ["writers", "workers"])
def test_a_rotated_key_keeps_old_checkpoints_verifiable(people, api_as, key_file, settings,
                                                        sequencer):
    settings.AUDIT_CHECKPOINT_EVERY = 3
    settings.AUDIT_SEQUENCER = sequencer  # with workers, writers only queue their entries
    dana = api_as(people.dana)
    append(4)
    old = trusted_key()
    out = run("rotate-key")  # places the queue and its own entry, signed by the old key
    new = trusted_key()
    assert new != old and list(new)[0] in out
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert not AuditPendingEntry.objects.exists()
    append(6, actor="bob")
    sequence_pending()  # what the workers' sequencer does with bob's queued entries
    published = dana.get("/api/v1/audit/keys").json()["keys"]
    assert [(k["key_id"], k["retired_at"] is None) for k in published] == [
        (list(old)[0], False), (list(new)[0], True)]
    heads = dana.get("/api/v1/audit/checkpoints?page_size=500").json()["results"]
    signers = {head["key_id"] for head in heads}
    assert signers == {list(old)[0], list(new)[0]}
    for head in heads:
        signed_heads.verify_checkpoint(head, {**old, **new})
    rotation = next(e for e in all_entries(dana) if e["action"] == "audit.key_rotated")
    introduced = {k: v for k, v in rotation["after"].items()
                  if k not in ("previous_key_id", "signature_by_previous")}
    signed_heads.verify_rotation(list(old.values())[0], introduced,
                                 rotation["after"]["signature_by_previous"])
    # The old key's last checkpoint covers its own retirement.
    assert any(h["size"] == rotation["seq"] and h["key_id"] == list(old)[0] for h in heads)
    report = verify_trail()
    assert report.ok, report.problem


def test_rotating_from_a_key_in_the_environment_needs_a_new_file(people, settings, tmp_path):
    settings.AUDIT_PRIVATE_KEY = keys.private_key_pem(Ed25519PrivateKey.generate()).decode()
    with pytest.raises(Exception, match="give --output PATH"):
        run("rotate-key")
    target = tmp_path / "next.pem"
    run("rotate-key", "--output", str(target))
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    with pytest.raises(Exception, match="exists"):
        run("rotate-key", "--output", str(target))


def test_under_debug_a_missing_key_is_generated_owner_only(settings, tmp_path):
    settings.AUDIT_PRIVATE_KEY_FILE = str(tmp_path / "var" / "audit-private-key.pem")
    settings.AUDIT_PRIVATE_KEY_GENERATE = True
    first = run("public-key")
    assert first.startswith("-----BEGIN PUBLIC KEY-----")
    assert stat.S_IMODE(os.stat(settings.AUDIT_PRIVATE_KEY_FILE).st_mode) == 0o600
    assert run("public-key") == first
