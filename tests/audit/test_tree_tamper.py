"""The stored Merkle tree (the nodes roots and proofs are served from) is held against the tree
recomputed from the entries, on PostgreSQL and SQLite, though the entries themselves are intact.

Verify always checks the nodes every root is made from (the frontier at the head, from which
the next checkpoint is signed, and at each checkpoint); a node only proofs use is checked with
`full_tree` (`audit verify --tree`, `?tree=full`), and without it a wrong one can only make a
proof fail the client's check against the signed root, never pass."""

import io

import pytest
from agentgov import merkle
from django.core.management import CommandError, call_command
from django.db import connection

import audit
from audit import tree
from audit.actions import checkpoint_head
from audit.choices import AuditAction
from audit.models import AuditEntry
from audit.tree import position
from audit.verify import TreeCheck, verify_trail

pytestmark = pytest.mark.django_db


@pytest.fixture
def trail(settings):
    """Eleven entries (stored subtrees of 1, 2, 4 and 8 leaves) with a signed checkpoint at 6,
    the PostgreSQL append-only trigger on the tree switched off as an attacker would."""
    settings.AUDIT_CHECKPOINT_EVERY = 1000  # only the checkpoint at 6, signed below
    for i in range(11):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}")
        if i == 5:
            checkpoint_head()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE audit_audittreenode DISABLE TRIGGER USER")
    assert verify_trail().ok and verify_trail(full_tree=True).ok


def sql(statement: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


@pytest.fixture(params=[20000, 4], ids=["one-read", "read-every-4"])
def chunk(request, monkeypatch):
    """The full check compares the tree a range at a time: whole here, or every 4 entries."""
    monkeypatch.setattr(TreeCheck, "CHUNK", request.param)


# The frontier at the head (11 = 8 + 2 + 1) and at the checkpoint (6 = 4 + 2).
ROOT_NODES = [
    (3, 0, 1),  # the subtree over entries 1 to 8: head
    (1, 4, 9),  # entries 9 and 10: head
    (0, 10, 11),  # the leaf of entry 11, the newest: head
    (2, 0, 1),  # entries 1 to 4: the checkpoint at 6
    (1, 2, 5),  # entries 5 and 6: the checkpoint at 6
]
PROOF_NODES = [
    (0, 6, 7),  # the leaf of entry 7
    (1, 0, 1),  # entries 1 and 2
    (2, 1, 5),  # entries 5 to 8
]


@pytest.mark.parametrize("full_tree", [False, True], ids=["roots", "full"])
@pytest.mark.parametrize("level, index, first", ROOT_NODES)
def test_a_changed_node_a_root_is_made_from_is_reported_at_the_first_entry_it_covers(
        trail, chunk, full_tree, level, index, first):
    sql("UPDATE audit_audittreenode SET hash = %s WHERE position = %s",
        ["ab" * 32, position(level, index)])
    report = verify_trail(full_tree=full_tree)
    assert (report.ok, report.first_broken_seq, report.reason) == (False, first, "edited")
    assert "stored Merkle tree node" in report.problem
    assert report.count == 11  # the entries themselves still verify


@pytest.mark.parametrize("level, index, first", PROOF_NODES)
def test_a_changed_node_only_proofs_use_is_reported_by_the_full_check(trail, chunk, level,
                                                                     index, first):
    sql("UPDATE audit_audittreenode SET hash = %s WHERE position = %s",
        ["ab" * 32, position(level, index)])
    report = verify_trail(full_tree=True)
    assert (report.ok, report.first_broken_seq, report.reason) == (False, first, "edited")
    assert f"over entries {first} to {first + (1 << level) - 1}" in report.problem


def test_without_the_full_check_a_wrong_proof_node_fails_the_clients_proof_never_passes(trail):
    """What the default verify leaves to the client: the stored leaf of entry 7 is wrong, so
    the inclusion proof of entry 8 (which carries it) no longer leads to the signed root."""
    sql("UPDATE audit_audittreenode SET hash = %s WHERE position = %s",
        ["ab" * 32, position(0, 6)])
    assert verify_trail().ok  # every root is still made from sound nodes...
    made = checkpoint_head()
    assert made is not None and verify_trail().ok  # ...so the head signed now is sound too
    proof = [bytes.fromhex(h) for h in tree.inclusion_proof(7, 11)]
    with pytest.raises(merkle.ProofError):
        merkle.verify_inclusion(7, 11, _true_leaf(8), proof, bytes.fromhex(made.root))
    with pytest.raises(CommandError):  # and the operator's full check names it
        call_command("audit", "verify", "--tree", stdout=io.StringIO())


def _true_leaf(seq: int) -> bytes:
    from agentgov.entries import entry_leaf_hash

    return entry_leaf_hash(AuditEntry.objects.get(seq=seq).to_dict())


@pytest.mark.parametrize("full_tree", [False, True], ids=["roots", "full"])
def test_a_removed_node_a_root_is_made_from_is_reported(trail, chunk, full_tree):
    sql("DELETE FROM audit_audittreenode WHERE position = %s", [position(1, 2)])
    report = verify_trail(full_tree=full_tree)
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 5, "edited")
    assert "entries 5 to 6" in report.problem


def test_a_removed_proof_node_is_reported_by_the_full_check(trail, chunk):
    sql("DELETE FROM audit_audittreenode WHERE position = %s", [position(2, 1)])
    report = verify_trail(full_tree=True)
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 5, "edited")
    assert "entries 5 to 8" in report.problem


def test_an_untouched_tree_after_more_appends_still_verifies(trail, chunk):
    for i in range(20):
        audit.record(actor="bob", action=AuditAction.ROLE_GRANTED, target=f"user:v{i}")
    for full_tree in (False, True):
        report = verify_trail(full_tree=full_tree)
        assert report.ok and report.count == 31


def test_compliance_asks_the_api_for_the_full_check(trail, people, api_as):
    sql("UPDATE audit_audittreenode SET hash = %s WHERE position = %s",
        ["ab" * 32, position(0, 6)])
    dana = api_as(people.dana)
    assert dana.get("/api/v1/audit/verify").json()["ok"]
    full = dana.get("/api/v1/audit/verify?tree=full").json()
    assert (full["ok"], full["first_broken_seq"], full["reason"]) == (False, 7, "edited")
    refused = dana.get("/api/v1/audit/verify?tree=everything")
    assert refused.status_code == 400 and b"tree" in refused.content
