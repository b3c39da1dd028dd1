"""Enumerations of chat approvals."""

from django.db import models


class Provider(models.TextChoices):
    """The chat a person's account is in."""

    SLACK = "slack"
    TEAMS = "teams"


class Subject(models.TextChoices):
    """What a chat message asks a decision on."""

    PROPOSAL = "proposal"
    ESCALATION = "escalation"


class Button(models.TextChoices):
    """The buttons a message carries: each maps to the console's own action."""

    APPROVE = "approve"  # a proposal
    REJECT = "reject"  # a proposal
    ALLOW = "allow"  # a pending decision
    DENY = "deny"  # a pending decision
    REVERT = "revert"  # drift
    ACKNOWLEDGE = "acknowledge"  # behaviour
