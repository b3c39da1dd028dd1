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
    AGENT_REGISTERED = "agent.registered"
    AGENT_TOKEN_ISSUED = "agent.token_issued"
    PROPOSAL_CREATED = "proposal.created"
    PROPOSAL_UPDATED = "proposal.updated"
    PROPOSAL_APPROVED = "proposal.approved"
    PROPOSAL_REJECTED = "proposal.rejected"
    PROPOSAL_WITHDRAWN = "proposal.withdrawn"
    PROPOSAL_SUPERSEDED = "proposal.superseded"
    PROPOSAL_REEVALUATED = "proposal.reevaluated"
    VERSION_ACTIVATED = "version.activated"
    GUARDRAIL_CREATED = "guardrail.created"
    GUARDRAIL_UPDATED = "guardrail.updated"
    GUARDRAIL_DELETED = "guardrail.deleted"
    AUDIT_EXPORTED = "audit.exported"
    AUDIT_VERIFIED = "audit.verified"
