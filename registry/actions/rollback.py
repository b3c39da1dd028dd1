"""Rolling an agent back: proposing an earlier approved generation again, approved like any
change."""

from typing import Any

from django.db import transaction

import audit
from audit.choices import AuditAction
from config.errors import Conflict, Invalid, NotFound
from registry.actions.proposals import ProposalOutcome, check_can_propose, propose
from registry.choices import VersionSource, VersionState
from registry.models import Agent


@transaction.atomic
def propose_rollback(agent_name: str, generation: int, *, actor: Any, comment: str = "",
                     source: str = VersionSource.API) -> ProposalOutcome:
    """Propose the spec and metadata of an earlier approved generation as a new version."""
    agent = Agent.objects.select_related("owner").filter(name=agent_name).first()
    if agent is None:
        raise NotFound(f"No agent named {agent_name!r}.")
    check_can_propose(agent, actor)  # before anything about its generations is told
    earlier = agent.versions.filter(state=VersionState.APPROVED, generation=generation).first()
    if earlier is None:
        raise Invalid(f"{agent.name} has no approved generation {generation}.", details=[
            {"pointer": "/generation",
             "message": f"expected an approved generation from 1 to {agent.generation}"}])
    if generation == agent.generation:
        raise Conflict(f"{agent.name} is already at generation {generation}.",
                       code="already_active")
    why = comment.strip() or f"roll back to generation {generation}"
    outcome = propose(agent, earlier.spec, earlier.metadata, actor=actor, source=source,
                      base_generation=agent.generation, comment=why)
    if outcome.action == "unchanged":
        raise Conflict(f"{agent.name}'s active spec already equals generation {generation}"
                       if outcome.version.pk == agent.active_version_id else
                       f"Your pending proposal #{outcome.version.pk} already rolls "
                       f"{agent.name} back to generation {generation}.", code="unchanged")
    audit.record(actor=actor, action=AuditAction.ROLLBACK_PROPOSED,
                 target=f"proposal:{outcome.version.pk}", agent=agent.name,
                 before={"generation": agent.generation},
                 after={"generation": generation, "proposal": outcome.version.pk}, reason=why)
    return outcome
