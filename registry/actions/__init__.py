"""Every state change of the registry; each writes its audit row in the same transaction."""

from registry.actions.connector_secrets import grant_connector_secret, revoke_connector_secret
from registry.actions.guardrails import create_guardrail, delete_guardrail, update_guardrail
from registry.actions.notifications import (
    delete_preference,
    set_preference,
    verify_preference,
)
from registry.actions.people import (
    create_person,
    grant_role,
    issue_agent_token,
    issue_api_token,
    record_account_created,
    record_password_change,
    record_sign_in,
    record_sign_in_failure,
    record_sign_out,
    revoke_role,
    set_account_flags,
)
from registry.actions.proposals import (
    ProposalOutcome,
    apply_manifests,
    approve_proposal,
    check_can_apply,
    check_can_decide,
    check_can_propose,
    propose,
    reject_proposal,
    withdraw_proposal,
)
from registry.actions.recertification import propose_recertification, set_review_interval
from registry.actions.retirement import approve_retirement, propose_retirement, reject_retirement
from registry.actions.review import comment_on_proposal
from registry.actions.rollback import propose_rollback
from registry.actions.sso import sign_in_from_provider
from registry.actions.tokens import keep_agent_token, revoke_api_token, visible_tokens
from registry.actions.toxic import (
    create_toxic_combination,
    delete_toxic_combination,
    update_toxic_combination,
)
from registry.actions.waiver_requests import (
    decline_waiver_request,
    grant_waiver_request,
    request_waiver,
)
from registry.actions.waivers import confirm_waiver, grant_waiver, withdraw_waiver

__all__ = [
    "ProposalOutcome", "apply_manifests", "approve_proposal", "approve_retirement",
    "check_can_apply", "check_can_decide", "check_can_propose", "create_guardrail",
    "create_person", "delete_guardrail", "grant_connector_secret", "grant_role", "grant_waiver",
    "confirm_waiver", "verify_preference", "request_waiver", "grant_waiver_request",
    "decline_waiver_request",
    "issue_agent_token", "issue_api_token", "keep_agent_token", "propose", "propose_retirement",
    "propose_rollback", "record_account_created", "record_password_change", "record_sign_in",
    "record_sign_in_failure", "record_sign_out", "reject_proposal", "revoke_api_token",
    "revoke_connector_secret", "revoke_role", "set_account_flags", "update_guardrail",
    "visible_tokens", "withdraw_proposal", "create_toxic_combination",
    "update_toxic_combination", "delete_toxic_combination", "propose_recertification",
    "set_review_interval", "reject_retirement", "withdraw_waiver", "comment_on_proposal",
    "delete_preference", "set_preference", "sign_in_from_provider",
]
