"""Every state change of the registry; each writes its audit row in the same transaction."""

from registry.actions.guardrails import create_guardrail, delete_guardrail, update_guardrail
from registry.actions.people import (
    create_person,
    grant_role,
    issue_agent_token,
    issue_api_token,
    record_sign_in,
    record_sign_in_failure,
    record_sign_out,
    revoke_api_token,
    revoke_role,
)
from registry.actions.proposals import (
    ProposalOutcome,
    apply_manifests,
    approve_proposal,
    propose,
    reject_proposal,
    withdraw_proposal,
)
from registry.actions.retirement import approve_retirement, propose_retirement
from registry.actions.rollback import propose_rollback
from registry.actions.waivers import grant_waiver

__all__ = [
    "ProposalOutcome", "apply_manifests", "approve_proposal", "approve_retirement",
    "create_guardrail", "create_person", "delete_guardrail", "grant_role", "grant_waiver",
    "issue_agent_token", "issue_api_token", "propose", "propose_retirement", "propose_rollback",
    "record_sign_in", "record_sign_in_failure", "record_sign_out", "reject_proposal",
    "revoke_api_token", "revoke_role", "update_guardrail", "withdraw_proposal",
]
