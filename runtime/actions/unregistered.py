"""What platforms report for agents the registry does not know: kept as shadow agents, with
the same observed-state history a registered agent gets (it becomes the agent's own when it is
registered). The loop's observed-state API hands such reports here (registered with
reconciliation.actions.observations from runtime's AppConfig.ready)."""

from typing import Any

from django.db import transaction
from django.utils import timezone

from reconciliation.actions.observations import append_observation
from reconciliation.models import ObservedState
from runtime.models import UnregisteredAgent


@transaction.atomic
def note_unregistered_observation(name: str, state: dict[str, Any], *, actor: Any,
                                  source: str = "platform"
                                  ) -> tuple[UnregisteredAgent, ObservedState, bool]:
    """Keep what a platform reported for an agent the registry does not know, with the same
    history a registered agent gets (it becomes the agent's own history when it is
    registered). Returns (shadow agent, row, changed)."""
    now = timezone.now()
    shadow, _ = UnregisteredAgent.objects.get_or_create(
        name=name, defaults={"first_seen": now, "last_seen": now})
    shadow = UnregisteredAgent.objects.select_for_update(no_key=True).get(pk=shadow.pk)
    history = ObservedState.objects.filter(unregistered=shadow, agent__isnull=True)
    row, changed = append_observation(history, state, actor=actor, source=source,
                                      target=f"unregistered:{name}", agent_name=name,
                                      unregistered=shadow)
    shadow.last_seen = now
    shadow.last_observation = state
    shadow.save(update_fields=["last_seen", "last_observation"])
    return shadow, row, changed
