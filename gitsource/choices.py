"""Enums of the Git sources."""

from django.db import models


class SyncState(models.TextChoices):
    """How an agent's approved desired state stands against its Git branch."""

    IN_SYNC = "in_sync"      # the branch holds what is approved
    AHEAD = "ahead"          # the branch holds a change waiting for approval
    DIVERGED = "diverged"    # the approved state is no longer in the branch (rewritten, removed)
    REFUSED = "refused"      # the branch holds a change the control plane refused


class CommitState(models.TextChoices):
    """A commit status as Git hosts know it (GitHub's four; GitLab maps them)."""

    PENDING = "pending"
    SUCCESS = "success"
    FAILURE = "failure"
    ERROR = "error"


class PolicyState(models.TextChoices):
    """Where a policy commit stands: compliance's four eyes, then applied (or why not)."""

    PENDING = "pending"        # waiting for a compliance person other than its proposer
    APPLIED = "applied"        # approved and applied to the rules in force
    REJECTED = "rejected"      # a compliance person said no
    REFUSED = "refused"        # unreadable, a failing test case, or a proposer who may not
    SUPERSEDED = "superseded"  # a newer policy commit came before a decision
