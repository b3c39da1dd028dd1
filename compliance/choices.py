"""Enumerations of the compliance app."""

from django.db import models


class StopScope(models.TextChoices):
    """What a stop reaches."""

    FLEET = "fleet"  # every agent
    TEAM = "team"  # the agents whose `team` label has this value
    SELECTOR = "selector"  # the agents carrying every one of these labels
    OWNER = "owner"  # one person's agents


class EvidenceQuery(models.TextChoices):
    """The product's evidence a control can be shown by (compliance/evidence_queries.py)."""

    APPROVALS_FOUR_EYES = "approvals_four_eyes", "approvals by someone other than the proposer"
    RECERTIFICATIONS_ON_TIME = "recertifications_on_time", "recertifications before the date"
    DRIFT_CORRECTED = "drift_corrected", "drift detected and corrected, with times"
    DECISIONS_SIGNED_OFF = "decisions_signed_off", "decisions held for a human sign-off"
    AUDIT_SIGNED_HEADS = "audit_signed_heads", "audit tree heads signed by a trusted key"


class QueryStatus(models.TextChoices):
    """What one evidence query found in a period."""

    MET = "met"  # items, every one meets the query
    PARTIAL = "partial"  # some do, some do not
    FAILED = "failed"  # items, none meets it
    NONE = "none"  # no item in the period: nothing shows the control


class ControlColour(models.TextChoices):
    """A control's colour in a framework report."""

    GREEN = "green"
    AMBER = "amber"
    RED = "red"
