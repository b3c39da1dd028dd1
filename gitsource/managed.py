"""The gate every proposal passes: an agent managed from Git takes no edit from elsewhere that
would make the database disagree with its branch."""

from typing import Any

from config.errors import Conflict
from gitsource.models import ManagedAgent
from registry.choices import VersionSource
from registry.manifest import spec_hash


def refuse_edits_outside_git(agent: Any, spec: dict, metadata: dict, source: str) -> None:
    """409 `managed_by_git` for a proposal from the API, the web editor, `manage.py apply`,
    a rollback or an escalation that is not what the branch holds."""
    if source == VersionSource.GIT:
        return

    managed = (ManagedAgent.objects.select_related("source")
               .filter(agent_id=agent.pk, source__enabled=True).first())
    if managed is None:
        return
    if (managed.branch_spec_sha256 == spec_hash(spec)
            and managed.branch_metadata == metadata):
        return  # the branch's own state (a recertification, say) disagrees with nothing
    where = f"{managed.source.url} branch {managed.source.branch}, {managed.path}"
    raise Conflict(f"{agent.name} is managed from Git (source {managed.source.name}: "
                   f"{where}); change it there with a commit, which becomes a proposal.",
                   code="managed_by_git",
                   details=[{"pointer": "/spec", "message": f"managed from Git: {where}"}])
