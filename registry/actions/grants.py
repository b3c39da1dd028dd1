"""Starting the clocks of grants counted from approval, inside the approval's transaction."""

from datetime import datetime
from typing import Any

import audit
from audit.choices import AuditAction
from registry.grant_clocks import start_clocks
from registry.manifest import spec_hash
from registry.models import DesiredStateVersion


def start_grant_clocks(version: DesiredStateVersion, *, actor: Any, now: datetime) -> None:
    """Give each grant counted from approval its expiry, now + its duration (in the caller's
    transaction, before the version becomes active)."""
    spec, begun = start_clocks(version.spec, now)
    if not begun:
        return
    version.spec = spec
    version.spec_sha256 = spec_hash(spec)
    version.save(update_fields=["spec", "spec_sha256"])
    for grant in begun:
        audit.record(actor=actor, action=AuditAction.GRANT_STARTED,
                     target=f"proposal:{version.pk}", agent=version.agent.name, after=grant,
                     reason=f"grant on {grant['resource']} counted from approval: "
                            f"{grant['duration']}, until {grant['expires_at']}")
