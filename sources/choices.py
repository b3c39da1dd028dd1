"""Enumerations of permission sources."""

from django.db import models


class ReadingStatus(models.TextChoices):
    """Whether the last attempt to read a source succeeded."""

    KNOWN = "known"  # read now: `access` is what the source grants
    UNKNOWN = "unknown"  # the source could not be read: `access` is the last known state
