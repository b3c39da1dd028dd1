"""Enumerations of the registry."""

from django.db import models


class Role(models.TextChoices):
    """The four roles; each is a Django group of the same name."""

    OWNER = "owner"
    APPROVER = "approver"
    COMPLIANCE = "compliance"
    ADMIN = "admin"
