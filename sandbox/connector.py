"""sandbox: a simulated agent platform stored in the database, with fault injection. Agents
whose spec names connector type sandbox reach it (registered by sandbox/apps.py)."""

import os
import signal
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reconciliation import connectors
from reconciliation.connectors.base import ApplyOutcome, ConnectorError, SimulatedCrash
from reconciliation.reconciler.diff import apply_operations
from registry.models import Agent
from sandbox.actions import ensure_sandbox
from sandbox.models import SandboxAgent


def _deployed(agent: Agent) -> SandboxAgent:
    """The platform deploys an agent as approved the first time anything reaches for it."""
    return ensure_sandbox(agent)


class SandboxConnector:
    """Reads and changes SandboxAgent rows; honours idempotency keys like a real platform."""

    name = "sandbox"
    last_change: dict[str, Any] | None = None

    def observe(self, agent: Agent) -> dict[str, Any] | None:
        row = _deployed(agent)
        self.last_change = row.last_deployment  # the drift lab's deployment, if one stands
        if row.stale_until and row.stale_until > timezone.now():
            return row.stale_state  # the platform's own lagging cache
        return row.state

    def apply(self, agent: Agent, operation: dict[str, Any], key: str) -> ApplyOutcome:
        _deployed(agent)
        with transaction.atomic():
            row = SandboxAgent.objects.select_for_update(no_key=True).get(agent=agent)
            if key in row.applied_keys:
                return ApplyOutcome.DUPLICATE
            fault = row.fault if row.changes_until_fault == 0 else ""
        if fault:
            # Fire once: clear the fault in its own committed transaction, then fail or "die".
            SandboxAgent.objects.filter(pk=row.pk).update(fault="", changes_until_fault=None)
            if fault == "crash":
                if settings.SANDBOX_CRASH_KILLS_PROCESS:
                    os.kill(os.getpid(), signal.SIGKILL)  # a worker dying mid-correction
                raise SimulatedCrash(f"sandbox crash injected before change {key[:12]}")
            raise ConnectorError(f"sandbox failure injected before change {key[:12]}")
        with transaction.atomic():
            row = SandboxAgent.objects.select_for_update(no_key=True).get(agent=agent)
            if key in row.applied_keys:
                return ApplyOutcome.DUPLICATE
            now = timezone.now()
            if row.lag_seconds and not (row.stale_until and row.stale_until > now):
                row.stale_state = row.state
            if row.lag_seconds:
                row.stale_until = now + timedelta(seconds=row.lag_seconds)
            row.state = apply_operations(row.state, [operation])
            row.applied_keys = [*row.applied_keys[-999:], key]
            row.last_deployment = None  # a correction replaces what the deployment did
            row.apply_count += 1
            if row.changes_until_fault:
                row.changes_until_fault -= 1
            row.save()
        return ApplyOutcome.APPLIED


def register() -> None:
    """From SandboxConfig.ready: the loop reaches sandbox agents through this connector."""
    connectors.register("sandbox", lambda agent: SandboxConnector())
