"""An agent's health and sync as lists show and filter them (Argo CD's two words per app):
health says where it stands, sync whether the reconciler has converged it on its current
generation. Both read the AgentStatus row reached from the agent as `status`."""

from typing import Any

from django.db import models
from django.db.models import F, Q

from reconciliation.choices import FindingStatus, Health


class Sync(models.TextChoices):
    """Whether the agent runs its current approved generation, as last verified."""

    SYNCED = "synced", "in sync"
    OUT_OF_SYNC = "out_of_sync", "out of sync"
    UNKNOWN = "unknown", "not reconciled yet"


SYNCED = Q(status__converged=True, status__converged_generation=F("generation"))
NEVER_RECONCILED = Q(status__isnull=True) | Q(status__last_reconciled_at__isnull=True)


def sync_filter(value: str) -> Q:
    """Agents whose sync is `value` (a Sync value)."""
    if value == Sync.SYNCED:
        return SYNCED
    if value == Sync.OUT_OF_SYNC:
        return ~NEVER_RECONCILED & ~SYNCED
    return NEVER_RECONCILED


def health_filter(value: str) -> Q:
    """Agents whose health is `value`; an agent never reconciled counts as unknown."""
    if value == Health.UNKNOWN:
        return Q(status__health=Health.UNKNOWN) | Q(status__isnull=True)
    return Q(status__health=value)


def health_and_sync(agent: Any) -> tuple[str, str]:
    """(health, sync) of an agent fetched with select_related("status")."""
    return status_words(getattr(agent, "status", None) if hasattr(agent, "status") else None,
                        agent.generation)


def status_words(status: Any, generation: int) -> tuple[str, str]:
    """(health, sync) from an AgentStatus row (None: never reconciled) and the generation."""
    if status is None:
        return Health.UNKNOWN, Sync.UNKNOWN
    if status.last_reconciled_at is None:
        return status.health, Sync.UNKNOWN
    synced = status.converged and status.converged_generation == generation
    return status.health, Sync.SYNCED if synced else Sync.OUT_OF_SYNC


def health_beside(health: str, open_statuses: set[str]) -> str:
    """The health word to show beside these open findings: a stored "in policy" while a
    finding is open (read between a pass's detection and its settling) says what the
    findings say instead, so the word never contradicts the list next to it."""
    if health != Health.IN_POLICY or not open_statuses:
        return health
    if FindingStatus.ESCALATED in open_statuses:
        return Health.ESCALATED
    if FindingStatus.CORRECTING in open_statuses:
        return Health.CORRECTING
    return Health.DRIFTED
