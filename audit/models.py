"""Append-only audit rows, the chain head, the stored Merkle tree, signed checkpoints and keys."""

from typing import Any

from django.db import models

from audit.chain import format_time
from audit.choices import SignatureAlgorithm


class AppendOnlyError(RuntimeError):
    """Raised by any attempt to change or remove an audit row."""


class AppendOnlyQuerySet(models.QuerySet):
    """Bulk paths that would bypass the model's guards are refused."""

    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError("audit rows are append-only")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("audit rows are append-only")

    def bulk_update(self, *args: Any, **kwargs: Any) -> int:
        raise AppendOnlyError("audit rows are append-only")


class AppendOnlyModel(models.Model):
    """A row that can be inserted once and never changed or deleted."""

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError(f"{type(self).__name__} rows are append-only")
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(f"{type(self).__name__} rows are append-only")


class AuditFields(models.Model):
    """What an audited change says, before the log gives it a place (seq and hashes)."""

    at = models.DateTimeField()
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=255)
    agent = models.CharField(max_length=63, blank=True, default="")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    request_id = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        abstract = True


class AuditEntry(AppendOnlyModel, AuditFields):
    """One audited change: who did what to which target, before and after, hash-chained."""

    seq = models.BigIntegerField(primary_key=True)
    prev_hash = models.CharField(max_length=64)
    # Not indexed: nothing looks an entry up by its hash, and verify recomputes every hash, so a
    # unique index (two btrees of random strings) cost every append and proved nothing more.
    hash = models.CharField(max_length=64)
    # The canonical JSON the chain hash covers, kept so verify hashes stored bytes instead of
    # re-serialising every row; verify also checks it against the columns above. Empty on rows
    # written before it existed (verify then rebuilds it from the columns).
    canonical = models.TextField(blank=True, default="", db_default="")

    class Meta:
        ordering = ["seq"]
        indexes = [
            models.Index(fields=["agent", "seq"], name="audit_agent_seq"),
            models.Index(fields=["actor", "seq"], name="audit_actor_seq"),
            models.Index(fields=["action", "seq"], name="audit_action_seq"),
            models.Index(fields=["at"], name="audit_at"),
        ]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} {self.target} by {self.actor}"

    def to_dict(self) -> dict[str, Any]:
        """The exported and hashed form of the row."""
        return {
            "seq": self.seq,
            "at": format_time(self.at),
            "actor": self.actor,
            "action": self.action,
            "target": self.target,
            "agent": self.agent,
            "before": self.before,
            "after": self.after,
            "reason": self.reason,
            "request_id": self.request_id,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


class AuditPendingEntry(AuditFields):
    """An entry written in its change's transaction but not yet given a place in the log: the
    sequencer moves it into AuditEntry (seq, hashes, tree) in the same transaction that
    deletes it here, so it is sequenced exactly once."""

    id = models.BigAutoField(primary_key=True)

    seq = None  # not sequenced yet: no place in the log, no hash
    hash = None
    prev_hash = None

    class Meta:
        verbose_name_plural = "pending audit entries"

    def __str__(self) -> str:
        return f"pending {self.action} {self.target} by {self.actor}"


class AuditChainHead(models.Model):
    """The single row every append locks, so concurrent writers never fork the chain."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    seq = models.BigIntegerField(default=0)
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"head #{self.seq}"


class AuditTreeNode(AppendOnlyModel):
    """The hash of one complete subtree of the RFC 6962 tree over the entries.

    `position` packs (level, index) as level * 2**40 + index: the node covers leaves
    [index * 2**level, (index + 1) * 2**level). Only complete subtrees are stored, so any root
    or proof is a handful of these read in one query.
    """

    position = models.BigIntegerField(primary_key=True)
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"node {self.position >> 40}/{self.position & ((1 << 40) - 1)}"


class AuditCheckpoint(AppendOnlyModel):
    """A signed tree head: the size and Merkle root of the log, signed with a key held outside
    the database (legacy rows: an HMAC of the chain head)."""

    seq = models.BigIntegerField(primary_key=True)  # the tree size the checkpoint covers
    head_hash = models.CharField(max_length=64)
    root = models.CharField(max_length=64, blank=True, default="")
    at = models.DateTimeField()
    key_id = models.CharField(max_length=16, blank=True, default="")
    algorithm = models.CharField(max_length=16, choices=SignatureAlgorithm.choices,
                                 default=SignatureAlgorithm.ED25519)
    signature = models.CharField(max_length=128)

    class Meta:
        ordering = ["seq"]

    def __str__(self) -> str:
        return f"checkpoint #{self.seq}"

    def to_dict(self) -> dict[str, Any]:
        """The published form (docs/audit-format.md), as sent to witnesses and exported."""
        if self.algorithm == SignatureAlgorithm.HMAC_SHA256:
            return {"size": self.seq, "head_hash": self.head_hash, "at": format_time(self.at),
                    "algorithm": self.algorithm, "signature": self.signature}
        return {"size": self.seq, "root": self.root, "at": format_time(self.at),
                "key_id": self.key_id, "algorithm": self.algorithm,
                "signature": self.signature}


class AuditKey(models.Model):
    """A public key that signs (or once signed) checkpoints; the private half is never stored."""

    key_id = models.CharField(max_length=16, primary_key=True)
    algorithm = models.CharField(max_length=16, choices=SignatureAlgorithm.choices,
                                 default=SignatureAlgorithm.ED25519)
    public_key = models.CharField(max_length=64)  # base64 of the raw 32 bytes
    created_at = models.DateTimeField()
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"key {self.key_id}"

    def to_dict(self) -> dict[str, Any]:
        """The published form of the key."""
        return {"key_id": self.key_id, "algorithm": self.algorithm,
                "public_key": self.public_key, "created_at": format_time(self.created_at),
                "retired_at": format_time(self.retired_at) if self.retired_at else None}


class AuditArchive(AppendOnlyModel):
    """Entries first_seq..last_seq moved out of the live table into a file that verifies
    offline; the newest row is the boundary the live trail is verified from (entry last_seq's
    hash seeds the chain, the stored Merkle frontier at last_seq seeds the tree)."""

    last_seq = models.BigIntegerField(primary_key=True)  # a signed checkpoint's size
    first_seq = models.BigIntegerField()
    prev_hash = models.CharField(max_length=64)  # entry first_seq - 1's hash (genesis at 1)
    last_hash = models.CharField(max_length=64)  # entry last_seq's hash
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()  # the period the file covers, for evidence requests
    before = models.DateTimeField()  # the DATE the operator asked for
    file_name = models.CharField(max_length=255)
    sha256 = models.CharField(max_length=64)
    # The key rotations among the archived entries: verify still trusts the keys that signed
    # the archived checkpoints (each rotation is re-checked against the current key's chain).
    rotations = models.JSONField(default=list)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["last_seq"]

    def __str__(self) -> str:
        return f"archive {self.first_seq}-{self.last_seq} ({self.file_name})"

    def to_dict(self) -> dict[str, Any]:
        """What the `audit.archived` entry records about the archive."""
        return {"first_seq": self.first_seq, "last_seq": self.last_seq,
                "file": self.file_name, "sha256": self.sha256,
                "before": format_time(self.before)}
