"""Status back to Git: each commit's verdict (refused, waiting for approval, approved,
rejected) as a commit status, through a small provider interface.

`CommitStatuses` is the interface; `HttpCommitStatuses` sends GitHub's commit-status call
(`POST {status_url}/statuses/{sha}` with state, description, context and target_url) and
`GitLabCommitStatuses` GitLab's; the local Git server in the tests serves both. docs/git.md
says how to point each at its host.
"""

import json
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings

from config import outbound
from gitsource.actions import policy_in_force
from gitsource.choices import CommitState, PolicyState
from gitsource.models import GitChange, GitSource, PolicyChange
from reconciliation.models import AgentStatus
from registry.choices import VersionState
from registry.connector_secrets import secret_value
from registry.models import DesiredStateVersion


@dataclass(frozen=True)
class Verdict:
    """What a commit status says about one manifest of one commit."""

    state: CommitState
    description: str

    @property
    def key(self) -> str:
        return f"{self.state}:{self.description}"[:300]


class StatusRefused(OSError):
    """The Git host did not take the status (unreachable, refused, or not allowed)."""


class CommitStatuses(Protocol):
    """Where commit statuses go: one call per status."""

    def post(self, sha: str, *, state: CommitState, context: str, description: str,
             target_url: str) -> None: ...


class HttpCommitStatuses:
    """GitHub's commit-status API shape, through the outbound guard (allowed hosts only,
    address pinned, no redirects); a token from a connector secret when the source names one."""

    def __init__(self, status_url: str, token: str | None) -> None:
        self.status_url, self.token = status_url.rstrip("/"), token

    def post(self, sha: str, *, state: CommitState, context: str, description: str,
             target_url: str) -> None:
        url = f"{self.status_url}/statuses/{sha}"
        try:
            destination = outbound.check(url, settings.GIT_SOURCE_ALLOWED_HOSTS)
        except outbound.Refused as error:
            raise StatusRefused(str(error)) from None
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "Host": destination.host}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        body = json.dumps(self.body(state, context, description, target_url))
        answer = outbound.send(destination, "POST", destination.path, headers, body.encode(),
                               timeout=10)
        if not 200 <= answer.status < 300:
            raise StatusRefused(f"{url} answered {answer.status}")

    def body(self, state: CommitState, context: str, description: str,
             target_url: str) -> dict[str, str]:
        """GitHub's (and Gitea's, Forgejo's) body."""
        return {"state": state.value, "context": context, "description": description[:140],
                "target_url": target_url}


class GitLabCommitStatuses(HttpCommitStatuses):
    """GitLab's call, `POST {status_url}/statuses/{sha}` where status_url is
    `https://HOST/api/v4/projects/ID`: its own state names (failure is `failed`, error is
    `canceled`) and the context as `name`."""

    STATES = {CommitState.PENDING: "pending", CommitState.SUCCESS: "success",
              CommitState.FAILURE: "failed", CommitState.ERROR: "canceled"}

    def body(self, state: CommitState, context: str, description: str,
             target_url: str) -> dict[str, str]:
        return {"state": self.STATES[state], "name": context,
                "description": description[:140], "target_url": target_url}


GITLAB_PATH = "/api/v4/projects/"


def provider_for(source: GitSource) -> CommitStatuses | None:
    """The source's status provider (GitLab's when status_url is a GitLab project's API
    address, GitHub's shape otherwise), or None when it reports no statuses."""
    if not source.status_url:
        return None
    token = secret_value(source.status_secret_env) if source.status_secret_env else None
    if GITLAB_PATH in source.status_url:
        return GitLabCommitStatuses(source.status_url, token)
    return HttpCommitStatuses(source.status_url, token)


def verdict(change: GitChange) -> Verdict | None:
    """The status a change's commit carries now (None: nothing to say yet)."""
    if change.refused:
        return Verdict(CommitState.FAILURE, f"refused: {change.refused}")
    version = change.version
    if version is None:
        return None
    if version.state == VersionState.PENDING:
        held = "; held: a guardrail could not be evaluated" if version.held else ""
        given = version.approvals.filter(revision=version.revision).count()
        return Verdict(CommitState.PENDING, f"proposal {version.pk} waiting for approval: "
                       f"{given} of {version.required_approvals}{held}")
    if version.generation:  # approved, active or since superseded
        verified = " and verified" if _verified(version) else ""
        return Verdict(CommitState.SUCCESS, f"approved and applied as generation "
                       f"{version.generation}{verified} (proposal {version.pk})")
    if version.state == VersionState.REJECTED:
        return Verdict(CommitState.FAILURE, f"proposal {version.pk} rejected")
    return Verdict(CommitState.ERROR, f"proposal {version.pk} {version.state}")


def _verified(version: DesiredStateVersion) -> bool:
    """True when the reconciler saw the agent converge on this very generation."""
    return AgentStatus.objects.filter(agent_id=version.agent_id, converged=True,
                                      converged_generation=version.generation).exists()


POLICY_CONTEXT = "agent-governance/policies"


def policy_verdict(change: PolicyChange) -> Verdict:
    """The status a policy commit carries now: waiting for compliance, refused (naming the
    failing test cases), rejected, superseded, or approved, applied and verified."""
    if change.state == PolicyState.REFUSED:
        return Verdict(CommitState.FAILURE, f"refused: {change.refused}")
    if change.state == PolicyState.PENDING:
        who = change.proposed_by.username if change.proposed_by else "the committer"
        return Verdict(CommitState.PENDING, f"policy change {change.pk} waiting for approval "
                       f"by a compliance person other than {who}")
    if change.state == PolicyState.REJECTED:
        return Verdict(CommitState.FAILURE, f"policy change {change.pk} rejected by "
                       f"{change.decided_by.username}: {change.decision_comment}")
    if change.state == PolicyState.SUPERSEDED:
        return Verdict(CommitState.ERROR, f"policy change {change.pk} superseded before a "
                       "decision")
    approved = (f"approved by {change.decided_by.username}, applied"
                if change.decided_by else "nothing to change")
    verified = ("; verified: the rules in force are this commit's" if policy_in_force(change)
                else "; the rules in force have changed since")
    return Verdict(CommitState.SUCCESS, f"{approved} ({len(change.plan)} change(s)){verified}")
