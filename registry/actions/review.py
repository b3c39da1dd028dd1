"""The review thread's own entries: a comment from anyone involved, "request changes" from an
approver who may decide."""

from typing import Any

from django.db import transaction

import audit
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from config.errors import Invalid, NotAllowed
from registry.actions.proposals import _announce, _check_four_eyes, _check_pending, _locked_version
from registry.choices import ReviewVerdict
from registry.models import ReviewComment
from registry.principals import AgentPrincipal
from registry.review_thread import may_read

MAX_COMMENT = 2000


@transaction.atomic
def comment_on_proposal(version_id: int, *, actor: Any, body: str,
                        verdict: str = ReviewVerdict.COMMENT) -> ReviewComment:
    """Add to a proposal's thread. Anyone involved may comment; only an approver who may
    decide it (four eyes) may request changes, and only while it is pending."""
    version, agent = _locked_version(version_id)
    if isinstance(actor, AgentPrincipal) or not may_read(actor, version):
        raise NotAllowed("Only the people involved in a proposal write in its thread.")
    if verdict not in ReviewVerdict.values:
        raise Invalid(f"Unknown verdict {str(verdict)[:40]!r}.", details=[
            {"pointer": "/verdict", "message": f"one of {', '.join(ReviewVerdict.values)}"}])
    if not body.strip():
        raise Invalid("Say something: the comment is empty.",
                      details=[{"pointer": "/body", "message": "required"}])
    if len(body) > MAX_COMMENT:
        raise Invalid("The comment is too long.",
                      details=[{"pointer": "/body", "message": f"at most {MAX_COMMENT}"}])
    if verdict == ReviewVerdict.REQUEST_CHANGES:
        _check_four_eyes(version, agent, actor)
        _check_pending(version)
    comment = ReviewComment.objects.create(version=version, author=actor, verdict=verdict,
                                           revision=version.revision, body=body)
    action = (AuditAction.PROPOSAL_CHANGES_REQUESTED if verdict == ReviewVerdict.REQUEST_CHANGES
              else AuditAction.PROPOSAL_COMMENTED)
    audit.record(actor=actor, action=action, target=f"proposal:{version.pk}", agent=agent.name,
                 after={"verdict": verdict, "revision": version.revision}, reason=body)
    _announce(AlertKind.PROPOSAL_REVIEW, version, agent)  # recorded now, sent after commit
    return comment
