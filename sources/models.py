"""What each permission source last said about each agent bound to it."""

from typing import Any

from django.db import models
from django.utils import timezone

from registry.models import Agent
from sources.choices import ReadingStatus


class SourceReading(models.Model):
    """The last reading of one agent's grants at one source; kept when the source is down."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="source_readings")
    source = models.CharField(max_length=63)
    role = models.CharField(max_length=63)
    # resource -> the highest access the role holds there (null: none)
    access = models.JSONField(default=dict)
    # every grant behind that access: object, privilege, how the role holds it
    grants = models.JSONField(default=list)
    # spec tool -> "allowed", "partial" or null (aws_iam: what the role's policies allow of it)
    tools = models.JSONField(default=dict)
    status = models.CharField(max_length=8, choices=ReadingStatus.choices,
                              default=ReadingStatus.UNKNOWN)
    read_at = models.DateTimeField(null=True, blank=True)  # last successful reading
    checked_at = models.DateTimeField(default=timezone.now)  # last attempt
    error = models.TextField(blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "source"],
                                               name="one_reading_per_agent_source")]

    def __str__(self) -> str:
        return f"{self.source} reading of {self.agent_id} ({self.status})"

    def to_dict(self) -> dict[str, Any]:
        """The audited and shown form."""
        return {"source": self.source, "role": self.role, "status": self.status,
                "access": self.access, "tools": self.tools, "grants": self.grants,
                "read_at": self.read_at.isoformat() if self.read_at else None,
                "error": self.error}
