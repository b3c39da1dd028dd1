"""A database made before Ed25519 upgrades: its entries join the Merkle tree, its HMAC
checkpoints still verify with the old AUDIT_SIGNING_KEY, and new checkpoints are Ed25519."""

import pytest
from agentgov import merkle
from agentgov.entries import entry_leaf_hash
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

import audit
from audit.chain import GENESIS_HASH, checkpoint_signature, entry_hash, format_time
from audit.choices import AuditAction
from audit.models import AuditCheckpoint
from audit.verify import fetch_chunk, verify_trail

BEFORE = [("audit", "0002_append_only")]


def migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def write_as_the_old_code_did(apps, key: str, count: int, every: int) -> None:
    """Entries and HMAC checkpoints exactly as the code before signed tree heads wrote them."""
    entry_model = apps.get_model("audit", "AuditEntry")
    checkpoint_model = apps.get_model("audit", "AuditCheckpoint")
    previous = GENESIS_HASH
    for seq in range(1, count + 1):
        fields = {"seq": seq, "at": timezone.now(), "actor": "alice", "action": "role.granted",
                  "target": f"user:u{seq}", "agent": "", "before": None,
                  "after": {"roles": ["owner"]}, "reason": "", "request_id": "",
                  "prev_hash": previous}
        previous = entry_hash({**fields, "at": format_time(fields["at"])})
        entry_model.objects.create(**fields, hash=previous)
        if seq % every == 0:
            checkpoint_model.objects.create(seq=seq, head_hash=previous, at=timezone.now(),
                                            signature=checkpoint_signature(key, seq, previous))
    apps.get_model("audit", "AuditChainHead").objects.update_or_create(
        pk=1, defaults={"seq": count, "hash": previous})


@pytest.mark.django_db(transaction=True)
def test_an_old_trail_upgrades_with_its_hmac_checkpoints_still_verifiable(settings):
    settings.AUDIT_CHECKPOINT_EVERY = 4
    migrate(BEFORE)
    try:
        old_apps = MigrationExecutor(connection).loader.project_state(BEFORE).apps
        write_as_the_old_code_did(old_apps, settings.AUDIT_SIGNING_KEY, count=9, every=4)
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    report = verify_trail()
    assert (report.ok, report.count, report.checkpoints) == (True, 9, 2), report.problem
    assert list(AuditCheckpoint.objects.values_list("algorithm", flat=True)) == [
        "hmac-sha256", "hmac-sha256"]
    for i in range(3):
        audit.record(actor="bob", action=AuditAction.ROLE_GRANTED, target=f"user:v{i}")
    newest = AuditCheckpoint.objects.order_by("-seq").first()
    assert (newest.seq, newest.algorithm) == (12, "ed25519")
    leaves = [entry_leaf_hash(row) for row in fetch_chunk(0, 100)]
    assert newest.root == merkle.root(leaves).hex()  # the tree covers the old entries too
    assert verify_trail().ok

    settings.AUDIT_SIGNING_KEY = "not-the-old-key"
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 1, "rehashed")
