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
