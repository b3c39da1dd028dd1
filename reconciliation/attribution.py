"""Drift attribution: what caused a finding, when anything knows, in this order:

0. a rollout: the agent still runs, at that point, what the generation it last converged at
   said; the newly approved generation moved, not the agent (Argo CD's Syncing, not drift:
   kept out of the time to detect and shown as the rollout it is), whatever change is named;
1. the change the reporter names: the platform's change log (an http connector's answer, or
   a push report, may carry `change_id` and `changed_by`) or the drift lab's deployment;
   a named change is what the reporter says, never checked: its cause carries
   `verified: false` and who reported it, and shows as reported wherever it is shown. What an
   agent reports about itself is kept inside it: its change ids are keyed under its own name
   (it cannot join its findings to another agent's change), and it may not name a person
   (the report is refused: an agent does not know who is behind a change, and a name there
   would read as blame or cover);
2. the agent's own pending proposal, when what it runs with matches what it proposed there
   (it changed itself ahead of approval);
3. `unknown`.

Every cause has a key, so the findings of one deployment or one platform change share it (and
the findings list filters by it: `?cause=`). Pure functions apart from `pending_proposals`.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model

from reconciliation.reconciler.diff import Drift, diff
from registry.choices import VersionSource, VersionState

CHANGE_FIELDS = ("change_id", "changed_by")
ROLLOUT_PREFIX = "rollout:"


@dataclass(frozen=True)
class Rollout:
    """An agent moving from the generation it last converged at (`spec`) to a newer one."""

    agent: str
    from_generation: int
    to_generation: int
    spec: Mapping[str, Any]

    def cause(self) -> dict[str, Any]:
        return {"kind": "rollout", "key": f"{ROLLOUT_PREFIX}{self.agent}:{self.to_generation}",
                "from_generation": self.from_generation, "generation": self.to_generation}


def is_rollout(cause_key: str) -> bool:
    """A finding that is a rollout of an approved generation, not drift."""
    return cause_key.startswith(ROLLOUT_PREFIX)
MAX_FIELD = 200
UNKNOWN: dict[str, Any] = {"kind": "unknown", "key": "unknown"}


def split_change(report: Mapping[str, Any], *, reported_by: str = "platform",
                 agent: str = "") -> tuple[dict[str, Any], dict[str, Any] | None]:
    """An observed-state answer without its change fields, and the platform change they name
    (None when it names none). Non-string or over-long values are ignored, never trusted.
    `agent`: the report is the agent's own (its token), so the change is keyed under it."""
    state = {k: v for k, v in report.items() if k not in CHANGE_FIELDS}
    fields = {k: report[k][:MAX_FIELD] for k in CHANGE_FIELDS
              if isinstance(report.get(k), str) and report[k].strip()}
    if not fields:
        return state, None
    return state, platform_change(fields.get("change_id", ""), fields.get("changed_by", ""),
                                  reported_by=reported_by, agent=agent)


def platform_change(change_id: str, changed_by: str, *, reported_by: str = "platform",
                    agent: str = "") -> dict[str, Any]:
    """A named change as a cause (keyed by its id when it gives one; an agent's own report
    under the agent's name), marked as reported, not verified: nothing checks it."""
    key = f"change:{change_id}" if change_id else f"changed-by:{changed_by}"
    if agent:
        key = f"agent:{agent}:{key}"
    return {"kind": "platform_change", "key": key[:MAX_FIELD], "change_id": change_id or None,
            "actor": changed_by or None, "verified": False, "reported_by": reported_by}


def names_a_person(changed_by: str | None) -> bool:
    """Whether `changed_by` is a person's username or email (any case): an agent's report
    may not name one."""
    if not changed_by:
        return False
    people = get_user_model().objects
    text = changed_by.strip()
    return (people.filter(username__iexact=text).exists()
            or ("@" in text and people.filter(email__iexact=text).exists()))


def deployment(deployment_id: str, actor: str, reason: str) -> dict[str, Any]:
    """A deployment on the (simulated) platform as a cause."""
    return {"kind": "deployment", "key": f"deployment:{deployment_id}",
            "deployment_id": deployment_id, "actor": actor, "reason": reason[:MAX_FIELD]}


def _explained_by(spec: Mapping[str, Any], observed: Mapping[str, Any], drift: Drift,
                  now: datetime) -> bool:
    """The drift's pointer is not drift against this spec: the agent runs with what it
    proposed there."""
    return drift.pointer not in {d.pointer for d in diff(spec, observed, now)}


def cause_of(drift: Drift, *, change: Mapping[str, Any] | None, observed: Mapping[str, Any],
             proposals: Iterable[tuple[int, Mapping[str, Any]]], now: datetime,
             rollout: Rollout | None = None) -> dict[str, Any]:
    """The cause of one drift: the rollout of a newly approved generation, else the named
    change, else the agent's own pending proposal that explains it (the newest first),
    else unknown."""
    if rollout is not None and _explained_by(rollout.spec, observed, drift, now):
        return rollout.cause()  # a named change did not touch what is as it was approved
    if change:
        return dict(change)
    for proposal_id, spec in proposals:
        if _explained_by(spec, observed, drift, now):
            return {"kind": "own_proposal", "key": f"proposal:{proposal_id}",
                    "proposal": proposal_id}
    return dict(UNKNOWN)


def pending_proposals(agent: Any) -> list[tuple[int, dict[str, Any]]]:
    """The agent's own pending proposals (made through its token), newest first."""
    return list(agent.versions.filter(state=VersionState.PENDING, source=VersionSource.AGENT)
                .order_by("-created_at").values_list("pk", "spec"))
