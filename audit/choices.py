"""Enumerated audit action names: every audited change names one of these."""

from django.db import models


class AuditAction(models.TextChoices):
    """What an audit entry records."""

    USER_SIGNED_IN = "user.signed_in"
    USER_SIGN_IN_FAILED = "user.sign_in_failed"
    USER_SIGNED_OUT = "user.signed_out"
    USER_CREATED = "user.created"
    ROLE_GRANTED = "role.granted"
    ROLE_REVOKED = "role.revoked"
    TOKEN_ISSUED = "token.issued"
    TOKEN_REVOKED = "token.revoked"
    AUDIT_EXPORTED = "audit.exported"
    AUDIT_VERIFIED = "audit.verified"
