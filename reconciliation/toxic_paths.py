"""Toxic paths in what the fleet really runs with: each path the observed states form between
the two sides of a toxic combination is a finding on each agent at its ends; a path no longer
observed (either side's permission removed, the link gone, the rule deleted) is resolved.

Checked by a job after every changed observation and every rule change; checks that pile up
collapse into one (the queued key is cleared when a check starts, so nothing seen after the
start is missed: reconciliation/toxic_path_requests.py)."""

import hashlib
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from audit.alert_kinds import AlertKind
from config import queues
from reconciliation.actions.findings import move_finding, open_finding
from reconciliation.agent_status import refresh_status
from reconciliation.choices import OPEN_STATUSES, TOXIC_PATH_KIND, FindingStatus
from reconciliation.fleet_snapshot import enqueue_refresh
from reconciliation.models import Finding, ObservedState
from reconciliation.toxic_path_requests import QUEUED_KEY
from registry.models import Agent
from registry.toxic import ToxicPath, toxic_paths
from registry.toxic_fleet import enabled_rules


def fingerprint(path: ToxicPath) -> str:
    return hashlib.sha256("|".join((TOXIC_PATH_KIND, *path.key)).encode()).hexdigest()


def _open(agent: Agent, path: ToxicPath, now: datetime) -> None:
    digest = fingerprint(path)
    finding = Finding.objects.filter(agent=agent, fingerprint=digest).first()
    said = {"why": f"toxic path observed: {path.describe()}", "after": {"path": path.to_dict()},
            "alert_fields": {"message": f"toxic path: {path.describe()}"}}
    if finding is None:
        open_finding(agent, **said, fingerprint=digest, kind=TOXIC_PATH_KIND,
                     pointer=f"/toxic/{path.rule}", expected=None, actual=path.to_dict(),
                     severity="high", area="config",
                     generation=agent.generation, behaviour=True, operation=None,
                     reason=f"toxic path: {path.describe()}", first_seen=now, detected_at=now,
                     last_seen=now, observed_at=now)
    elif finding.status in OPEN_STATUSES:
        Finding.objects.filter(pk=finding.pk).update(last_seen=now, actual=path.to_dict())
    else:  # it had been cleared and is back
        move_finding(finding, FindingStatus.OPEN, agent=agent, **said,
                     occurrence=finding.occurrence + 1, detected_at=now, last_seen=now,
                     actual=path.to_dict())


def _clear(finding: Finding) -> None:
    reason = "the toxic path is no longer observed"
    move_finding(finding, FindingStatus.RESOLVED, reason=reason,
                 announce=AlertKind.DRIFT_CORRECTED, alert_fields={"message": reason})


@transaction.atomic
def record_observed_paths(now: datetime | None = None) -> dict[str, int]:
    """Open a finding for each observed toxic path on the agents at its ends; resolve the
    ones no longer observed. Returns counts."""
    now = now or timezone.now()
    paths = toxic_paths(ObservedState.latest_by_name(), enabled_rules())
    wanted: dict[tuple[str, str], ToxicPath] = {}
    for path in paths:
        for name in {path.left_agent, path.right_agent}:
            wanted[(name, fingerprint(path))] = path
    agents = Agent.objects.in_bulk({name for name, _ in wanted}, field_name="name")
    for (name, _), path in sorted(wanted.items()):
        _open(agents[name], path, now)
    stale = [f for f in Finding.objects.select_related("agent").filter(
        kind=TOXIC_PATH_KIND, status__in=OPEN_STATUSES)
        if (f.agent.name, f.fingerprint) not in wanted]
    for finding in stale:
        _clear(finding)
    for agent in {*agents.values(), *(f.agent for f in stale)}:
        refresh_status(agent, now=now)
    return {"paths": len(paths), "cleared": len(stale)}


def check_observed_paths_job() -> dict[str, int]:
    """RQ entry point: clear the queued key first, so a change seen from now on queues
    another check."""
    queues.queue("default").connection.delete(QUEUED_KEY)
    found = record_observed_paths()
    enqueue_refresh()  # the fleet view lists the observed paths too
    return found
