"""Appending to the audit trail, growing its Merkle tree, signing tree heads, rotating keys."""

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

from agentgov import checkpoints, merkle
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from audit import archiving, export, keys, placing, sequencing, signer, tree, witnesses
from audit.chain import (
    GENESIS_HASH,
    canonical_json,
    chain_hash,
    entry_payload,
    format_time,
    leaf_bytes,
)
from audit.choices import AuditAction, SignatureAlgorithm
from audit.context import current_request_id
from audit.models import (
    AuditArchive,
    AuditChainHead,
    AuditCheckpoint,
    AuditEntry,
    AuditKey,
    AuditPendingEntry,
    AuditTreeNode,
)

log = logging.getLogger(__name__)
QUEUE_BATCH = 5000  # queued entries placed per transaction
ARCHIVE_DELETE_BATCH = 5000  # archived rows deleted per transaction
PENDING_FIELDS = ("at", "actor", "action", "target", "agent", "before", "after", "reason",
                  "request_id")


def actor_label(actor: Any) -> str:
    """How a principal is named in the trail: a username, agent:<name>, or system:<part>."""
    if isinstance(actor, str):
        return actor
    label = getattr(actor, "audit_label", None)
    if label:
        return str(label)
    username = getattr(actor, "get_username", None)
    if callable(username) and getattr(actor, "is_authenticated", False):
        return str(username())
    return "anonymous"


def _json_safe(value: Any) -> Any:
    """The value as it will read back from a JSON column, so the hash survives the round trip."""
    return None if value is None else json.loads(canonical_json(value))


def _lock_head(*, held: bool = False) -> AuditChainHead:
    """The chain head, locked until the commit, after the placing lock (audit/placing.py;
    `held` when this transaction has it already)."""
    if not held:
        placing.hold()
    head = AuditChainHead.objects.select_for_update(no_key=True).filter(pk=1).first()
    if head is None:
        AuditChainHead.objects.get_or_create(pk=1, defaults={"seq": 0, "hash": GENESIS_HASH})
        head = AuditChainHead.objects.select_for_update(no_key=True).get(pk=1)
    return head


def record(
    *,
    actor: Any,
    action: AuditAction | str,
    target: str,
    agent: str = "",
    before: Any = None,
    after: Any = None,
    reason: str = "",
    request_id: str | None = None,
) -> AuditEntry | AuditPendingEntry:
    """Write one entry inside the caller's transaction: nothing changes without its entry.

    If no other transaction holds the placing lock, the entry takes its place in the log at
    once (the lock then stays held until the caller commits); if one does, or with
    AUDIT_SEQUENCER=workers, it is queued unsequenced (one INSERT, no waiting) and placed within
    AUDIT_SEQUENCE_DELAY_SECONDS. With `writers`, a writer that placed its entry places what
    queued meanwhile after its commit (`settle`).
    """
    content = {
        "at": timezone.now(),
        "actor": actor_label(actor)[:200],
        "action": AuditAction(action).value,
        "target": str(target)[:255],
        "agent": agent or "",
        "before": _json_safe(before),
        "after": _json_safe(after),
        "reason": reason or "",
        "request_id": (request_id if request_id is not None else current_request_id())[:64],
    }
    return _write(content)


# No savepoint: the entry is one INSERT in the caller's transaction, and if it fails the
# caller's change must not commit without it anyway.
@transaction.atomic(savepoint=False)
def _write(content: dict[str, Any]) -> AuditEntry | AuditPendingEntry:
    if settings.AUDIT_SEQUENCER == "workers":
        pending = AuditPendingEntry(**content)
        AuditPendingEntry.objects.bulk_create([pending])
        transaction.on_commit(sequencing.kick, robust=True)
        return pending
    queued = placing.queue_unless_free(content)
    if queued is not None:
        # Placed by the holder after it releases the lock (it reads the queue then), by the
        # next writer to hold it (it places the queue first), or, if this commit came after
        # the holder's read and no one writes after it, by the workers' sequencer within
        # AUDIT_SEQUENCE_DELAY_SECONDS. A look-up of its own after the commit would cost a
        # fourth round trip on every queued append (most appends, under load).
        return AuditPendingEntry(id=queued, **content)
    # This transaction holds the placing lock: after the commit, place what queued meanwhile.
    transaction.on_commit(settle, robust=True)
    # What is queued goes first, including any entry it queued earlier (when the lock was
    # taken), so one transaction's entries keep order.
    head, frontier, rows = _claim(QUEUE_BATCH)
    if len(rows) < QUEUE_BATCH:
        return _place(head, [*rows, content], frontier)
    _place(head, rows, frontier)  # a backlog: place one batch, and queue behind the rest
    pending = AuditPendingEntry(**content)
    AuditPendingEntry.objects.bulk_create([pending])
    return pending


def _place(head: AuditChainHead, contents: list[dict[str, Any]],
           frontier: dict[int, bytes] | None = None) -> AuditEntry:
    """Give entries the next seqs after the locked head: chain hashes, tree nodes, the
    checkpoints whose sizes they reach, and the new head; the last entry, as saved. `frontier`
    is the tree's stored right edge at the head's size when the caller has read it (else it is
    read here). Rows stay plain dicts (a model instance per entry cost as much as hashing it):
    only the last is made an AuditEntry, for the writer that placed its own entry last."""
    rows, seq, previous = [], head.seq, head.hash
    for content in contents:
        seq += 1
        row = {**content, "seq": seq, "prev_hash": previous}
        payload = entry_payload({**row, "at": format_time(row["at"])})
        previous = row["hash"] = chain_hash(payload, previous)
        row["canonical"] = payload
        rows.append(row)
    leaves = [merkle.leaf_hash(leaf_bytes(row["canonical"], row["hash"])) for row in rows]
    nodes = (tree.nodes_to_append(head.seq, leaves) if frontier is None
             else tree.grow(head.seq, dict(frontier), leaves))
    stored = placing.store(rows, nodes, seq, previous)
    if not stored:
        AuditEntry.objects.bulk_create([AuditEntry(**row) for row in rows])
        AuditTreeNode.objects.bulk_create([AuditTreeNode(position=p, hash=h) for p, h in nodes])
    every = settings.AUDIT_CHECKPOINT_EVERY
    for row in rows:
        if row["seq"] % every == 0:
            try:
                _sign(row["seq"], row["hash"])
            except signer.SigningRefused as error:
                # The entries stay placed (refusing them would stop every change the product
                # makes); the head stays unsigned, and the refusal is made loud after commit.
                transaction.on_commit(lambda error=error: refuse_signing(error), robust=True)
    head.seq, head.hash = seq, previous
    if not stored:
        head.save(update_fields=["seq", "hash"])
    sequencing.placed.send(sender=AuditEntry, last_seq=seq)
    last = AuditEntry(**rows[-1])
    last._state.adding, last._state.db = False, head._state.db  # as the ORM leaves a saved row
    return last


def _settle_after() -> None:
    """This transaction holds the placing lock without placing what queues meanwhile: place it
    after the commit (writers that found the lock taken count on its holder to)."""
    if settings.AUDIT_SEQUENCER == "writers":
        transaction.on_commit(settle, robust=True)


@transaction.atomic
def sequence_pending(*, limit: int = QUEUE_BATCH, held: bool = False) -> int:
    """Place up to `limit` queued entries in the log, oldest first, in one transaction: a
    sequencer killed mid-batch leaves them all queued, none half-placed or placed twice.
    `held`: this session holds the placing lock already (`settle`)."""
    if not held:
        placing.hold()  # one placer at a time
    head, frontier, rows = _claim(limit)
    if rows:
        _place(head, rows, frontier)
    return len(rows)


def settle() -> None:
    """After a writer that held the placing lock commits (AUDIT_SEQUENCER=writers): place what
    queued meanwhile if no one holds the lock now, never waiting. If someone does, they read
    the queue again after they release it (audit/placing.py), and so does this loop. An entry
    whose writer commits after the last such read waits for the next writer to hold the lock,
    or for the workers' sequencer (every AUDIT_SEQUENCE_DELAY_SECONDS: audit/sequencing.py)."""
    while placing.try_hold_if_queued():  # one round trip when nothing is queued
        try:
            # A batch short of the limit emptied the queue as it read it; what queued since is
            # for the check after the release, which must come anyway.
            while sequence_pending(held=True) == QUEUE_BATCH:
                pass
        finally:
            placing.release()


def _claim(limit: int) -> tuple[AuditChainHead, dict[int, bytes] | None, list[dict[str, Any]]]:
    """As the holder of the placing lock: the chain head, locked until the commit, with the
    tree's stored right edge (None: not read), and the oldest `limit` queued entries' contents,
    taken from the queue (one round trip on PostgreSQL)."""
    claimed = placing.claim(limit)
    if claimed is None:
        return _lock_head(held=True), None, _take_queue(limit)
    found, rows = claimed
    if found is None:  # no head row yet (a database the migrations did not seed)
        return _lock_head(held=True), None, rows
    seq, hash_, frontier = found
    head = AuditChainHead(pk=1, seq=seq, hash=hash_)
    head._state.adding, head._state.db = False, connection.alias
    return head, frontier, rows


def _take_queue(limit: int = QUEUE_BATCH) -> list[dict[str, Any]]:
    """The oldest `limit` queued entries' contents, deleted from the queue (the caller holds the
    head and places them in the same transaction, so each is placed exactly once)."""
    taken = placing.take_queue(limit)
    if taken is not None:
        return taken
    rows = list(AuditPendingEntry.objects.order_by("id").values("id", *PENDING_FIELDS)[:limit])
    ids = [row.pop("id") for row in rows]
    if ids:
        AuditPendingEntry.objects.filter(id__in=ids).delete()
    return rows


def tree_root(size: int) -> str:
    """The Merkle root of the first `size` entries, from the stored tree."""
    return tree.root(size)


def _published_key(private: Ed25519PrivateKey) -> AuditKey:
    """The current key's row, published the first time the key signs."""
    form = checkpoints.published_key(private.public_key(), format_time(timezone.now()))
    key, _ = AuditKey.objects.get_or_create(
        key_id=form["key_id"],
        defaults={"public_key": form["public_key"], "created_at": timezone.now()},
    )
    return key


def _sign(seq: int, head_hash: str) -> AuditCheckpoint:
    """Sign the tree head at `seq`, once it is proven consistent with every head signed before
    (audit/signer.py; raises SigningRefused otherwise). The signer remembers it after commit."""
    private = keys.signing_key()
    root = tree.root(seq)
    signer.check(seq, root, private)
    _published_key(private)
    at = timezone.now()
    signed = checkpoints.sign_checkpoint(private, seq, root, format_time(at))
    checkpoint = AuditCheckpoint(
        seq=seq, head_hash=head_hash, root=signed["root"], at=at, key_id=signed["key_id"],
        algorithm=SignatureAlgorithm.ED25519, signature=signed["signature"],
    )
    checkpoint.save()
    published = checkpoint.to_dict()

    def after_commit() -> None:
        signer.remember(published)
        witnesses.publish(published)

    transaction.on_commit(after_commit)
    return checkpoint


def refuse_signing(error: signer.SigningRefused) -> None:
    """Make a refusal to sign loud: logged, kept beside the signer's memory for /readyz
    (audit/signer.py), recorded as an `audit.signing_refused` entry and announced to the alert
    stream (once per refusal, not on every append that reaches a checkpoint size while it
    lasts)."""
    if not signer.keep_refusal(error):
        return
    try:
        with transaction.atomic():
            record(actor="system:audit-signer", action=AuditAction.SIGNING_REFUSED,
                   target=f"audit:{error.size}", after={"size": error.size},
                   reason=error.message)
    except Exception as failure:  # noqa: BLE001  (the refusal stands; the entry is best effort)
        log.critical("audit signing refusal not recorded in the trail: %s", failure)
    signer.signing_refused.send(sender=signer.SigningRefused, size=error.size,
                                message=error.message)


@transaction.atomic
def checkpoint_head() -> AuditCheckpoint | None:
    """Sign the current head unless it is already signed (the periodic checkpoint)."""
    head = _lock_head()
    _settle_after()
    if head.seq == 0 or AuditCheckpoint.objects.filter(seq=head.seq).exists():
        return None
    return _sign(head.seq, head.hash)


@transaction.atomic
def rotate_key(*, actor: Any, new_key: Ed25519PrivateKey) -> AuditEntry:
    """Retire the current signing key for `new_key`: the rotation is an entry carrying the old
    key's signature over the new key, and a checkpoint by the old key covering it; the trusted
    key list (configuration, AUDIT_TRUSTED_KEYS_FILE) then bounds the old key to that size and
    the new key to larger ones. The old public key stays published."""
    old_private = keys.signing_key()
    _lock_head()
    _settle_after()
    old = _published_key(old_private)
    now = timezone.now()
    published = checkpoints.published_key(new_key.public_key(), format_time(now))
    if AuditKey.objects.filter(key_id=published["key_id"]).exists():
        raise ValueError(f"key {published['key_id']} has signed before: rotate to a fresh key")
    AuditKey.objects.create(key_id=published["key_id"], public_key=published["public_key"],
                            created_at=now)
    AuditKey.objects.filter(pk=old.pk).update(retired_at=now)
    endorsement = checkpoints.sign_rotation(old_private, published)
    entry = _placed(record(
        actor=actor, action=AuditAction.KEY_ROTATED, target=f"audit-key:{published['key_id']}",
        before=old.to_dict(),
        after={**published, "previous_key_id": old.key_id,
               "signature_by_previous": endorsement},
    ))
    head = _lock_head()
    covering = AuditCheckpoint.objects.filter(seq=head.seq).first()
    if covering is None:
        covering = _sign(head.seq, head.hash)  # the old key's last checkpoint covers it
    if covering.key_id != old.key_id:
        raise ValueError("the head covering the rotation is not signed by the old key")
    keys.retire(old_private.public_key(), new_key.public_key(), head.seq)
    return entry


def _placed(entry: AuditEntry | AuditPendingEntry) -> AuditEntry:
    """The entry as placed in the log: one queued (AUDIT_SEQUENCER=workers) is placed now, with
    everything queued before it, as the holder of the placing lock."""
    if not isinstance(entry, AuditPendingEntry):
        return entry
    while AuditPendingEntry.objects.filter(id__lte=entry.id).exists():
        sequence_pending()
    return AuditEntry.objects.filter(action=entry.action, target=entry.target, actor=entry.actor,
                                     at=entry.at).latest("seq")


@transaction.atomic
def sign_for_export(*, actor: Any, target: str, after: dict[str, Any], agent: str = "") -> int:
    """Record that the trail (or part of it) is being exported, then sign the head so the file
    ends at a signed checkpoint that covers its own export entry; returns that size."""
    _placed(record(actor=actor, action=AuditAction.AUDIT_EXPORTED, target=target, agent=agent,
                   after=after))
    made = checkpoint_head()
    return made.seq if made else _lock_head().seq


def archive_before(*, actor: Any, before: datetime, directory: Path) -> AuditArchive | None:
    """Move the oldest entries, up to the newest signed checkpoint whose entries all happened
    before `before`, to a file in `directory` that verifies offline, then delete them from the
    live table; the live trail goes on verifying from the boundary. None when nothing may go.

    Three steps, each safe to cut short: the file is written (fsync, rename); the boundary
    record and its `audit.archived` entry commit together; the rows are deleted in batches.
    A run after a crash rewrites the same file, or finishes the deletion."""
    delete_archived()  # what a run cut short left behind
    since = archiving.newest()
    size = archiving.archivable_size(before, since.last_seq if since is not None else 0)
    if size is None:
        return None
    name, digest = export.write_archive_file(Path(directory), since, size)
    archive = record_archive(actor=actor, before=before, since=since, size=size,
                             file_name=name, sha256=digest)
    delete_archived()
    return archive


@transaction.atomic
def record_archive(*, actor: Any, before: datetime, since: AuditArchive | None, size: int,
                   file_name: str, sha256: str) -> AuditArchive:
    """The boundary record and the `audit.archived` entry that announces it, in one
    transaction, with a checkpoint that signs the announcement at once."""
    _lock_head()
    if archiving.newest() != since:
        raise ValueError("another archive was recorded meanwhile: run the archive again")
    first = since.last_seq + 1 if since is not None else 1
    first_entry = AuditEntry.objects.only("at").get(seq=first)
    last_entry = AuditEntry.objects.only("at", "hash").get(seq=size)
    rotations = list(AuditEntry.objects.filter(
        action=AuditAction.KEY_ROTATED, seq__gte=first, seq__lte=size,
    ).order_by("seq").values("before", "after"))
    archive = AuditArchive(
        first_seq=first, last_seq=size, prev_hash=since.last_hash if since else GENESIS_HASH,
        last_hash=last_entry.hash, first_at=first_entry.at, last_at=last_entry.at,
        before=before, file_name=file_name, sha256=sha256, created_at=timezone.now(),
        rotations=[*(since.rotations if since else []), *_json_safe(rotations)],
    )
    archive.save()
    checkpoint = AuditCheckpoint.objects.get(seq=size)
    _placed(record(actor=actor, action=AuditAction.AUDIT_ARCHIVED,
                   target=f"audit:{first}-{size}",
                   after={**archive.to_dict(), "checkpoint": {"size": size,
                                                              "root": checkpoint.root}}))
    head = _lock_head()
    if not AuditCheckpoint.objects.filter(seq=head.seq).exists():
        _sign(head.seq, head.hash)
    return archive


def delete_archived(batch: int = ARCHIVE_DELETE_BATCH) -> int:
    """Delete the rows an archive record covers, oldest first, a batch per transaction (the
    table is not partitioned; short transactions keep writers from waiting). Tree nodes and
    checkpoints stay: roots and proofs still cover the archived range."""
    boundary = archiving.newest()
    if boundary is None:
        return 0
    deleted = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            # The model refuses deletes; on PostgreSQL the trigger allows these rows only
            # because the boundary record covers them.
            cursor.execute("DELETE FROM audit_auditentry WHERE seq IN (SELECT seq FROM "
                           "audit_auditentry WHERE seq <= %s ORDER BY seq LIMIT %s)",
                           [boundary.last_seq, batch])
            done = cursor.rowcount
        deleted += done
        if done < batch:
            return deleted
