"""Append-only audit rows, the chain head that serialises appends, and signed checkpoints."""

from typing import Any

from django.db import models

from audit.chain import format_time


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


class AuditEntry(AppendOnlyModel):
    """One audited change: who did what to which target, before and after, hash-chained."""

    seq = models.BigIntegerField(primary_key=True)
    at = models.DateTimeField()
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=255)
    agent = models.CharField(max_length=63, blank=True, default="")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    request_id = models.CharField(max_length=64, blank=True, default="")
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

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


class AuditChainHead(models.Model):
    """The single row every append locks, so concurrent writers never fork the chain."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    seq = models.BigIntegerField(default=0)
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"head #{self.seq}"


class AuditCheckpoint(AppendOnlyModel):
    """A signed statement of the chain head at some seq, made with a key outside the database."""

    seq = models.BigIntegerField(primary_key=True)
    head_hash = models.CharField(max_length=64)
    at = models.DateTimeField()
    signature = models.CharField(max_length=64)

    class Meta:
        ordering = ["seq"]

    def __str__(self) -> str:
        return f"checkpoint #{self.seq}"
