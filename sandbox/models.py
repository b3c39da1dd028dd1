"""The simulated platform's own state: one SandboxAgent per agent deployed to it.

Its table was made by the reconciliation app and keeps that name (`db_table`)."""

import hashlib
from typing import Any

from django.db import models

from audit.chain import canonical_json
from registry.models import Agent


class SandboxAgent(models.Model):
    """The built-in simulated agent platform, with fault injection for the demo and tests."""

    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, related_name="sandbox")
    state = models.JSONField(default=dict)
    applied_keys = models.JSONField(default=list)  # idempotency keys already applied
    apply_count = models.PositiveIntegerField(default=0)  # changes actually applied, ever
    # Faults: fail (raise) or crash (kill the worker) once `changes_until_fault` more changes apply.
    fault = models.CharField(max_length=8, blank=True, default="")  # "" | fail | crash
    changes_until_fault = models.PositiveIntegerField(null=True, blank=True)
    # Lagging reads: for `lag_seconds` after a change, reads return `stale_state`.
    lag_seconds = models.PositiveIntegerField(default=0)
    stale_state = models.JSONField(null=True, blank=True)
    stale_until = models.DateTimeField(null=True, blank=True)
    # The last deployment that changed it from outside (the drift lab), until a correction
    # replaces what it did: {deployment_id, actor, reason}.
    last_deployment = models.JSONField(null=True, blank=True)
    # SHA-256 of `state`'s canonical JSON, kept by save(): what the platform would list in bulk,
    # so the resync compares digests in SQL instead of reading every state.
    state_sha256 = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        db_table = "reconciliation_sandboxagent"  # its name from before the move

    def __str__(self) -> str:
        return f"sandbox:{self.agent_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.state_sha256 = hashlib.sha256(canonical_json(self.state).encode()).hexdigest()
        fields = kwargs.get("update_fields")
        if fields is not None and "state" in fields:
            kwargs["update_fields"] = {*fields, "state_sha256"}
        super().save(*args, **kwargs)
