"""Git sources of desired state, the keys people sign commits with, and what each commit's
manifests became."""

from django.contrib.auth.models import User
from django.db import models

from gitsource.choices import PolicyState, SyncState
from registry.models import Agent, DesiredStateVersion


class GitSource(models.Model):
    """A branch of a repository whose folder of manifests is one owner's or team's desired
    state; its commits become proposals, never applied without approval."""

    name = models.SlugField(max_length=63, unique=True)
    url = models.CharField(max_length=500)
    branch = models.CharField(max_length=200, default="main")
    folder = models.CharField(max_length=300, blank=True, default="")
    # Compliance's rules (guardrails, group rules, ...) as YAML; "" : this source has none.
    policy_folder = models.CharField(max_length=300, blank=True, default="")
    # Accountable for the source; proposals from commits nobody signed are made in their name.
    owner = models.ForeignKey(User, on_delete=models.PROTECT, related_name="git_sources")
    team = models.CharField(max_length=100, blank=True, default="")
    # Connector secrets (names, never values): fetch credentials, webhook HMAC, status token.
    secret_env = models.CharField(max_length=100, blank=True, default="")
    webhook_secret_env = models.CharField(max_length=100, blank=True, default="")
    status_url = models.CharField(max_length=500, blank=True, default="")
    status_secret_env = models.CharField(max_length=100, blank=True, default="")
    commit_url = models.CharField(max_length=500, blank=True, default="")  # "{sha}" filled in
    require_signed = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    head = models.CharField(max_length=40, blank=True, default="")
    fetched_at = models.DateTimeField(null=True, blank=True)
    fetch_error = models.CharField(max_length=500, blank=True, default="")
    fetch_failed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name

    def link(self, sha: str) -> str:
        """Where a person reads the commit."""
        if self.commit_url:
            return self.commit_url.replace("{sha}", sha)
        return f"{self.url}@{sha}"

    def to_dict(self) -> dict:
        return {"name": self.name, "url": self.url, "branch": self.branch,
                "folder": self.folder, "policy_folder": self.policy_folder,
                "owner": self.owner.username, "team": self.team,
                "require_signed": self.require_signed, "enabled": self.enabled,
                "status_url": self.status_url, "commit_url": self.commit_url,
                "head": self.head or None,
                "fetched_at": self.fetched_at.isoformat() if self.fetched_at else None,
                "fetch_error": self.fetch_error or None,
                "fetch_failed_at": (self.fetch_failed_at.isoformat()
                                    if self.fetch_failed_at else None)}


class SigningKey(models.Model):
    """An SSH public key a person signs commits with; a signed commit is theirs."""

    person = models.ForeignKey(User, on_delete=models.CASCADE, related_name="signing_keys")
    public_key = models.CharField(max_length=2000)
    fingerprint = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.person.username} {self.fingerprint}"


class GitChange(models.Model):
    """One manifest at one commit and what became of it: a proposal, or why not."""

    source = models.ForeignKey(GitSource, on_delete=models.CASCADE, related_name="changes")
    commit = models.CharField(max_length=40)
    path = models.CharField(max_length=500)
    agent_name = models.CharField(max_length=63, blank=True, default="")
    author = models.CharField(max_length=300)
    signer = models.CharField(max_length=150, blank=True, default="")
    subject = models.CharField(max_length=300, blank=True, default="")
    version = models.ForeignKey(DesiredStateVersion, null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="git_changes")
    refused = models.CharField(max_length=500, blank=True, default="")
    reported = models.CharField(max_length=300, blank=True, default="")  # last status sent
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "commit", "path", "agent_name"],
                                               name="one_change_per_commit_file_agent")]

    def __str__(self) -> str:
        return f"{self.source.name} {self.commit[:12]} {self.path}"


class ManagedAgent(models.Model):
    """An agent whose desired state a Git source holds, and how it stands against the branch."""

    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, related_name="git")
    source = models.ForeignKey(GitSource, on_delete=models.CASCADE, related_name="agents")
    path = models.CharField(max_length=500)
    branch_commit = models.CharField(max_length=40, blank=True, default="")
    # The spec the branch holds now ("" once the manifest is gone from it).
    branch_spec_sha256 = models.CharField(max_length=64, blank=True, default="")
    branch_metadata = models.JSONField(default=dict)
    sync = models.CharField(max_length=10, choices=SyncState.choices)
    message = models.CharField(max_length=500, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.agent.name} from {self.source.name}"


class PolicyChange(models.Model):
    """One commit of a source's policy folder: the rules it states, the plan from the rules in
    force to them, its test cases' results, and compliance's decision."""

    source = models.ForeignKey(GitSource, on_delete=models.CASCADE,
                               related_name="policy_changes")
    commit = models.CharField(max_length=40)
    author = models.CharField(max_length=300)
    signer = models.CharField(max_length=150, blank=True, default="")
    subject = models.CharField(max_length=300, blank=True, default="")
    proposed_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="+")
    state = models.CharField(max_length=10, choices=PolicyState.choices)
    refused = models.TextField(blank=True, default="")
    rules = models.JSONField(default=dict)  # kind -> name -> fields, as the folder states them
    plan = models.JSONField(default=list)   # [{kind, name, op, before, after}]
    tests = models.JSONField(default=list)  # [{test, case, expected, got, message, ok}]
    decided_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True, default="")
    reported = models.CharField(max_length=300, blank=True, default="")  # last status sent
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "commit"],
                                               name="one_policy_change_per_commit")]

    def __str__(self) -> str:
        return f"policy change {self.pk} ({self.source.name} {self.commit[:12]})"

    @property
    def failing_cases(self) -> list[dict]:
        return [case for case in self.tests if not case.get("ok")]

    def to_dict(self) -> dict:
        """The served and audited form."""
        return {"id": self.pk, "source": self.source.name, "commit": self.commit,
                "link": self.source.link(self.commit), "author": self.author,
                "signer": self.signer or None, "subject": self.subject,
                "proposed_by": self.proposed_by.username if self.proposed_by_id else None,
                "state": self.state, "refused": self.refused or None,
                "failing_cases": self.failing_cases, "tests": self.tests, "plan": self.plan,
                "decided_by": self.decided_by.username if self.decided_by_id else None,
                "decided_at": self.decided_at.isoformat() if self.decided_at else None,
                "decision_comment": self.decision_comment,
                "created_at": self.created_at.isoformat() if self.created_at else None}
