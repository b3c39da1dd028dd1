"""Enumerations of the compliance app."""

from django.db import models


class StopScope(models.TextChoices):
    """What a stop reaches."""

    FLEET = "fleet"  # every agent
    TEAM = "team"  # the agents whose `team` label has this value
    SELECTOR = "selector"  # the agents carrying every one of these labels
    OWNER = "owner"  # one person's agents
