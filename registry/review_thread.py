"""A proposal's review thread, as a pull request's: the proposer's reason, each approver's
comment, requested changes, approvals and the decision, in the order they happened, and who
may read it (the people involved: proposer, owner, approvers, compliance)."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from registry.choices import Role, VersionState
from registry.models import DesiredStateVersion
from registry.roles import has_role


@dataclass(frozen=True)
class ThreadEntry:
    """One entry: who, what verdict (proposed, comment, request_changes, approve, reject,
    withdrawn), on which revision, what they said, when."""

    at: datetime
    author: str
    verdict: str
    revision: int
    body: str

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at.isoformat(), "author": self.author, "verdict": self.verdict,
                "revision": self.revision, "body": self.body}


def may_read(user: Any, version: DesiredStateVersion) -> bool:
    """The people involved: who proposed it (or holds the token that did), the agent's owner,
    approvers and compliance staff."""
    pk = getattr(user, "pk", None)
    return pk is not None and (
        pk in (version.proposed_by_id, version.token_holder_id, version.agent.owner_id)
        or has_role(user, Role.APPROVER, Role.COMPLIANCE))


def thread(version: DesiredStateVersion) -> list[ThreadEntry]:
    """Every entry of the thread, oldest first."""
    proposer = (version.proposed_by.username if version.proposed_by_id
                else f"agent {version.agent.name}")
    entries = [ThreadEntry(version.created_at, proposer, "proposed", 1, version.comment)]
    if version.revision > 1:
        entries.append(ThreadEntry(version.updated_at, proposer, "revised", version.revision,
                                   f"revision {version.revision}"))
    entries += [ThreadEntry(c.created_at, c.author.username, c.verdict, c.revision, c.body)
                for c in version.review_comments.select_related("author")]
    entries += [ThreadEntry(a.created_at, a.approver.username, "approve", a.revision, a.comment)
                for a in version.approvals.select_related("approver")]
    if version.state in (VersionState.REJECTED, VersionState.WITHDRAWN) and version.decided_at:
        who = version.decided_by.username if version.decided_by_id else proposer
        verdict = "reject" if version.state == VersionState.REJECTED else "withdrawn"
        entries.append(ThreadEntry(version.decided_at, who, verdict, version.revision,
                                   version.decision_comment))
    return sorted(entries, key=lambda e: e.at)
